/*
 * line.pml: a Spin model of ordered waiting, the line (s3lock/PROTOCOL.md §13).
 *
 * One lock; three ordered (FIFO) waiters and one waiter without order; the
 * line's tickets in a store that applies each request atomically (A1, A2);
 * a network that may deliver a ticket's create late, or never; a ticker
 * that advances the store's clock. The lock itself is not modelled again
 * (s3lock.pml does that): §13's line changes who tries, never what trying
 * does, so here the lock is an atomic test-and-set (`holder`), which the
 * waiter without order may take whenever it is free. Section numbers (§)
 * are PROTOCOL.md's; README.md in this directory maps the model to the
 * protocol and lists what it leaves out.
 *
 * Checked, as assertions (pan compiled with -DSAFETY, exhaustive search):
 *   (f) first come, first served (§13 "The ordering guarantee"): if waiter
 *       A's join ended before waiter B's join began, and A has not lost its
 *       place, given up or crashed since, then B does not acquire the lock
 *       before A does. At every acquisition by a waiter:
 *       assert(overtaken == 0), overtaken being the set of such waiters A.
 *   (h) no waiter is at the head (and so attempts the lock) while a waiter
 *       whose join ended before its own join began is still in line and has
 *       not lost its place, given up or crashed. When a line LIST puts a
 *       waiter at the head: assert(jumped == 0). (h) implies (f) for the
 *       head's acquisitions; (f) also covers the fast path (an attempt that
 *       finds the line empty and the lock free).
 * Not claimed, because §13 does not have it: "at most one waiter believes it
 * is at the head while trusting its place". Joins that overlap may draw the
 * same number, or one may draw a lower number and have its create land after
 * the other listed the line and found itself at the head: then both are at
 * the head, trusting their places, and both attempt the lock (whose own
 * mutual exclusion decides). §13 allows that: "joins that overlap are
 * ordered either way". -DCLAIM_ONE_HEAD asserts the claim (heads <= 1);
 * check.sh requires its counterexample.
 *
 * Losing a place. (f) and (h) excuse a waiter A exactly when §13 lets the
 * line pass it: when its trust in its place ends (it paused, crashed, or
 * its heartbeats were not answered in time), whether or not A runs to
 * notice; when it gives up (its DELETE); when it acquires. A ticket that is
 * deleted or skipped while its owner still trusts its place is a violation,
 * however and whenever the owner finds out. A crash is a waiter that never
 * takes another step (any waiter may stop at any step): its ticket lapses.
 *
 * Mutants: this file compiled with one define (spin -a -DMUTANT_X). Each
 * removes one mechanism of §13; check.sh requires a counterexample to (f),
 * checking (f) alone (-DPROPERTY=1), and for MUTANT_EARLY_LAPSE also one to
 * (h) alone (-DPROPERTY=2):
 *   MUTANT_NO_LINE_CHECK      an ordered attempt takes a free lock without
 *                             looking whether the line is empty ("Free lock,
 *                             non-empty line")
 *   MUTANT_EARLY_LAPSE        observers judge a ticket lapsed without the
 *                             slack (at Date - LastModified >= ticketValidity,
 *                             i.e. -DSLACK=0): before its owner has stopped
 *                             trusting its place ("Staying in line")
 *   MUTANT_NO_LIST_NUMBER     a joiner draws its number without listing the
 *                             line: from a stale view, the highest number of
 *                             the last line it listed, plus one ("Joining" 1)
 *   MUTANT_TRUST_FROM_ANSWER  a joiner whose create's outcome was unknown
 *                             counts its place's trust from the read-back
 *                             that found its ticket, not from the create's
 *                             send ("as a holder trusts a lease": from
 *                             `sent`)
 *   MUTANT_TRUST_FROM_RESEND  (with -DMAXTRY=1) a joiner that sends its
 *                             create again counts its place's trust from the
 *                             last send instead of the first ("as for an
 *                             epoch create": §5 counts from the first send)
 *   MUTANT_NO_READBACK        a create whose outcome is unknown is taken as
 *                             joined, without reading the key back
 *                             ("Joining" 2)
 *   MUTANT_EARLY_DELETE       the head deletes its ticket when it finds itself
 *                             at the head, before it has acquired ("when it
 *                             acquires, it deletes its ticket")
 *   MUTANT_NO_TURN            a waiter that is not at the head attempts the
 *                             lock ("The head attempts the lock")
 * and the boundary run -DMARGIN=0: a place trusted without the margin, with
 * the clock drift the margin exists for.
 * Variants, each without a mechanism of §13 that (f) turns out not to need
 * (README.md says what else needs it); check.sh requires that they verify:
 *   VARIANT_LIVE_NUMBER       a joiner draws the highest *live* number plus
 *                             one, ignoring lapsed tickets ("live or not")
 *   VARIANT_NO_TIE_BREAK      equal numbers are not ordered by the keys'
 *                             suffixes: a waiter is at the head when no live
 *                             ticket has a smaller number ("by the rest of
 *                             the key")
 *   VARIANT_NO_LAPSE_DELETE   lapsed tickets ahead are skipped, never deleted
 *                             ("deletes them ... and does not count them")
 *
 * Time (§6, §13 "Staying in line"), as in s3lock.pml. The store's clock
 * advances in ticks (process Ticker); the model keeps differences of two
 * readings of one clock, not timestamps: ta[k], a ticket's age (a LIST's
 * Date minus the ticket's LastModified), and ss[w], the ticks since waiter w
 * sent the write its trust in its place counts from. Both stop at the
 * largest value a rule compares them with.
 *   - Date - LastModified may exceed the true age by RES (one-second
 *     resolution, §6); the model takes the worst case: a ticket may be
 *     judged lapsed at true age TV + SLACK - RES (LAPSE).
 *   - Every waiter has the slowest clock A5 allows: over a ticket's validity
 *     it measures DRIFT ticks less than the store, so it trusts its place
 *     until TV - MARGIN + DRIFT ticks after `sent` (TRUST).
 *
 * Shared waiters (-DSHARED, PROTOCOL.md §17 "The line"). Waiters 2 and 3
 * take the lock shared, waiter 1 (and the waiter without order) exclusive:
 * the test-and-set becomes a reader-writer lock (`holder` for an exclusive
 * holder, `readers` for the shared ones; the shared and pending epochs that
 * make it one are shared.pml's). A shared waiter's ticket is of its kind
 * (`-shared`); a shared waiter is at the head when no live *exclusive*
 * ticket sorts before its own, and its fast path passes a line of shared
 * tickets only. (f) and (h) then read: no waiter acquires (or is at the
 * head) before an earlier *exclusive* waiter still in line, and no
 * exclusive waiter before any earlier waiter still in line: a shared waiter
 * may go in beside an earlier shared one. Its mutant:
 *   MUTANT_SHARED_PASSES_WRITER  a shared waiter's turn comes whatever is
 *                             ahead of it (it counts no ticket ahead), as
 *                             if sharing the lock made the line moot
 *
 * Trails. Every step prints a line (printf), which pan ignores and a replay
 * (spin -T -t) shows: check.sh prints each counterexample that way.
 */

/* ---------------------------------------------------------------- sizes */

#define NW 3            /* ordered waiters, ids 1..3 (the macros below spell
                           out the ticket slots 0..3) */
#define UW 4            /* the waiter without order, as holder */
#define FIRSTW 3        /* _pid of waiter 1 (after Ticker, Network, Unordered) */
#ifndef NT
#define NT 3            /* ticket numbers 1..NT: keeps the model finite */
#endif
#ifndef ACQUIRES
#define ACQUIRES 0      /* ordered Acquires per waiter (0: any number) */
#endif
#ifndef MAXTRY
#define MAXTRY 0        /* sends of the same create after the first (the SDK:
                           five; they only delay the give-up): -DMAXTRY=1
                           checks one, in about fifty times the states */
#endif
/* -DNO_UNORDERED leaves the waiter without order out (a smaller model for
 * MUTANT_TRUST_FROM_RESEND's counterexample, which does not need it). */

/* ---------------------------------------------------------- properties */
/* -DPROPERTY=1 or 2 checks only (f) or (h); 0 checks both. */
#ifndef PROPERTY
#define PROPERTY 0
#endif

/* ------------------------------------------------ time, in store ticks */
/* s3lock.pml's values, for the same argument (§6) with ticketValidity for
 * validityMs. A tick is not a second. */
#ifndef TV
#define TV 2            /* ticketValidity */
#endif
#ifndef MARGIN
#define MARGIN 1        /* a place is trusted until sent + TV - margin */
#endif
#ifndef DRIFT
#define DRIFT 1         /* how much less than TV a waiter's clock may measure */
#endif
#ifdef MUTANT_EARLY_LAPSE
#define SLACK 0         /* MUTANT: no serverSlack */
#endif
#ifndef SLACK
#define SLACK 1         /* serverSlack: lapsed once Date - LastModified >= TV + slack */
#endif
#ifndef RES
#define RES 1           /* how much Date - LastModified may exceed the true age */
#endif

#define TRUST (TV - MARGIN + DRIFT)  /* ticks after `sent` a waiter trusts its place */
#define LAPSE (TV + SLACK - RES)     /* true age at which a ticket may be judged lapsed */
/* The argument, in ticks (TV=2 MARGIN=1 DRIFT=1 SLACK=1 RES=1): LAPSE >=
 * TRUST (2 >= 2): when anyone may judge a ticket lapsed (true age of its
 * latest write >= LAPSE, so at least LAPSE since that write's `sent`), its
 * owner has stopped trusting its place. One tick less of margin
 * (-DMARGIN=0) or of slack (MUTANT_EARLY_LAPSE) breaks it. */

/* ------------------------------------------------------------ the store */
/* The line's tickets (§13 "Keys"). Slot w (1..3) holds the ticket of waiter
 * w's current join; slot 0 a ticket whose create landed after its waiter had
 * given up and deleted the key (§13 "Leaving"): nobody's. A ticket is present
 * when tk[k]; tn[k] is its number; ta[k] is the store's clock minus its
 * LastModified. Keys sort by number, then by their random suffix: waiter w's
 * suffix is modelled as w, and slot 0's ticket sorts first or last among
 * equal numbers (ox, chosen when it lands). The payload is reduced to who
 * owns the ticket (the slot) and when it was last written: the ETag and the
 * `write` id only tell a waiter's own writes apart, and here a waiter's
 * writes are answered one at a time. */
bit  tk[NW + 1];
byte tn[NW + 1];
byte ta[NW + 1];
bit  ox;

#define RANK(k) (k == 0 -> (ox -> NW + 1 : 0) : k)
/* -DSHARED: waiters 2 and 3 are shared; slot 0's ticket is of the kind of
 * the waiter whose late create it is (o0). */
#ifdef SHARED
#define SHR(w) (w >= 2)
bit  o0;
#define KIND(k) (k == 0 -> o0 : SHR(k))
#define EXCLMASK 2      /* the exclusive ordered waiters: w1 */
#else
#define SHR(w) 0
#define KIND(k) 0
#endif
#ifndef VARIANT_NO_TIE_BREAK
#define BEFORE(j, k) (tn[j] < tn[k] || (tn[j] == tn[k] && RANK(j) < RANK(k)))
#else
#define BEFORE(j, k) (tn[j] < tn[k])     /* VARIANT: ties are not broken */
#endif
/* A ticket in slot j, not me's own, that sorts before me's. */
#define AHEAD1(j, me) (j != me && tk[j] && BEFORE(j, me))
#define AHEAD(me) (AHEAD1(0, me) || AHEAD1(1, me) || AHEAD1(2, me) || AHEAD1(3, me))
#define LINE_EMPTY (!tk[0] && !tk[1] && !tk[2] && !tk[3])
/* What keeps waiter me out (§17): for a shared waiter, exclusive tickets
 * only; for an exclusive one, every ticket. */
#define BLOCKS(k, me) (!SHR(me) || !KIND(k))
#ifndef MUTANT_SHARED_PASSES_WRITER
#define TURN_AHEAD1(k, me) (AHEAD1(k, me) && BLOCKS(k, me))
#else
#define TURN_AHEAD1(k, me) (AHEAD1(k, me) && !SHR(me))  /* MUTANT: a shared waiter counts nothing ahead */
#endif
#define LINE_BLOCKS(me) ((tk[0] && BLOCKS(0, me)) || (tk[1] && BLOCKS(1, me)) || (tk[2] && BLOCKS(2, me)) || (tk[3] && BLOCKS(3, me)))
#define MAX2(a, b) (a > b -> a : b)
#ifndef VARIANT_LIVE_NUMBER
#define NUM(k) (tk[k] -> tn[k] : 0)
#else
#define NUM(k) ((tk[k] && ta[k] < LAPSE) -> tn[k] : 0)  /* VARIANT: live only */
#endif
#define HIGHEST MAX2(MAX2(NUM(0), NUM(1)), MAX2(NUM(2), NUM(3)))

inline delete_ticket(k) {
  tk[k] = 0; tn[k] = 0; ta[k] = 0;
  if :: k == 0 -> ox = 0 :: else fi
}

/* ------------------------------------------------------------- the lock */
/* §5, abstracted to one atomic test-and-set: an attempt on a free lock
 * acquires it, one on a held lock gets a HeldError. The lock's own timing,
 * ambiguity and epochs are s3lock.pml's. */
byte holder;           /* 0: no exclusive holder; 1..3: that waiter; UW: the waiter without order */
byte readers;          /* -DSHARED: the shared holders, a mask of 1 << w */
#define FREE_FOR(me) (holder == 0 && (SHR(me) || readers == 0))

/* ---------------------------------------------------------- the network */
/* One ticket create at a time may be delayed (a slow proxy, a request the
 * SDK retried) and reach the store later, or never. */
byte sw;               /* its waiter (0: none) */
byte sn;               /* its ticket number */
bit  so;               /* it can land only as nobody's ticket: its waiter gave up
                          (and deleted the key) or joined with another copy */

/* ---------------------------------------------------------- the waiters */
byte ss[NW + 1] = TRUST;  /* ticks since w sent the write its trust counts from */
bit  head[NW + 1];     /* w's latest line LIST put it at the head */
byte wn[NW + 1];       /* the number w's current join drew */
#ifdef MUTANT_NO_LIST_NUMBER
byte seen[NW + 1];     /* the highest number w saw at its latest line LIST */
#endif
#define TRUSTED(w) (ss[w] < TRUST)

/* ------------------------------------------- the properties' ghost state */
/* good[w]: w's join has ended (it believes it is in line), and w has not
 * since acquired, given up, or stopped trusting its place. ahead[b]: the
 * waiters that were good when b's join began (its line LIST; for the fast
 * path, its attempt's LIST) and have stayed good since: a waiter leaves
 * every ahead[] when it stops being good (excuse). (f): at b's acquisition
 * ahead[b] is empty; (h): also whenever a LIST puts b at the head. */
bit  good[NW + 1];
byte ahead[NW + 1];
#define GOODMASK ((good[1] << 1) | (good[2] << 2) | (good[3] << 3))
#ifndef SHARED
#define OTHERS(me) (GOODMASK & ~(1 << me))
#else
/* A shared waiter may go in beside (or before) an earlier shared one. */
#define OTHERS(me) (GOODMASK & ~(1 << me) & (SHR(me) -> EXCLMASK : 15))
#endif
byte overtaken, jumped;  /* ahead[b], copied for the assertions' text */

inline excuse(w) {
  good[w] = 0;
  ahead[1] = ahead[1] & ~(1 << w);
  ahead[2] = ahead[2] & ~(1 << w);
  ahead[3] = ahead[3] & ~(1 << w)
}

/* ------------------------------------------------------------ the clock */
/* One tick of the store's clock: every ticket's age and every waiter's time
 * since `sent` grows by one, up to the largest value a rule compares it
 * with. A waiter whose trust in its place ends here has lost its place
 * (§13), whether or not it runs to notice: it stops being good. */
active proctype Ticker() {
  byte i;
end:
  do
  :: d_step {
       printf("tick\n");
       i = 0;
       do
       :: i <= NW ->
          if :: tk[i] && ta[i] < LAPSE -> ta[i]++ :: else fi;
          if
          :: i > 0 && ss[i] < TRUST ->
             ss[i]++;
             if
             :: ss[i] == TRUST && good[i] ->
                printf("w%d stops trusting its place\n", i);
                excuse(i)
             :: else
             fi
          :: else
          fi;
          i++
       :: else -> break
       od;
       i = 0
     }
  od
}

/* ---------------------------------------------------------- the network */
active proctype Network() {
end:
  do
  :: atomic {
       sw != 0 ->
       if
       :: so ->
          printf("network: w%d's delayed create of ticket %d lands: nobody's ticket (w%d gave up, or joined with another copy)\n", sw, sn, sw);
          tk[0] = 1; tn[0] = sn; ta[0] = 0;
#ifdef SHARED
          o0 = SHR(sw);
#endif
          if :: ox = 0 :: ox = 1 fi
       :: !so && !tk[sw] ->
          printf("network: w%d's delayed create of ticket %d lands (200, unheard)\n", sw, sn);
          tk[sw] = 1; tn[sw] = sn; ta[sw] = 0
       :: !so && tk[sw] ->
          printf("network: w%d's delayed create of ticket %d lands: 412\n", sw, sn)
       :: printf("network: w%d's delayed create of ticket %d is lost\n", sw, sn)
       fi;
       sw = 0; sn = 0; so = 0
     }
  od
}

/* ------------------------------------------------ the waiter without order */
/* It takes the lock whenever it finds it free, and ignores the line (§13
 * "Free lock, non-empty line"). */
active proctype Unordered() {
end:
  do
#ifndef NO_UNORDERED
  :: atomic { holder == 0 && readers == 0 -> holder = UW; printf("u ACQUIRED (without order)\n") };
     atomic { holder = 0; printf("u releases\n") }
#else
  :: false                               /* -DNO_UNORDERED: only ordered waiters */
#endif
  od
}

/* ----------------------------------------------------------- the waiter */
/* Each atomic block of a waiter is one step: one request to the store (or
 * one attempt on the lock), applied atomically, with the waiter's decision
 * on its answer. Between two steps any other process may run and any number
 * of ticks may pass: that is how a waiter is slow, paused or crashed. */

/* Prints the waiters in the set m (a mask of 1 << w). */
inline print_set(m) {
  if :: m & 2 -> printf(" w1") :: else fi;
  if :: m & 4 -> printf(" w2") :: else fi;
  if :: m & 8 -> printf(" w3") :: else fi
}

/* Waiter me takes the lock: shared, beside other shared holders, or alone. */
inline take() {
  if :: SHR(me) -> readers = readers | (1 << me) :: else -> holder = me fi
}

/* Property (f), at an acquisition by waiter me; then me leaves the line. */
inline acquired() {
#if PROPERTY == 0 || PROPERTY == 1
  overtaken = ahead[me];
  if
  :: overtaken != 0 ->
     printf("OUT OF ORDER: w%d acquires before", me); print_set(overtaken);
     printf(", in line since before w%d's join began\n", me)
  :: else
  fi;
  assert(overtaken == 0);
#endif
  excuse(me); ahead[me] = 0
}

/* Lost its place (§13): DELETE the old ticket (in the step that found out),
 * then join again at the back. */
inline lose_place() {
  printf("w%d has lost its place: DELETE ticket %d, join again\n", me, tn[me]);
  delete_ticket(me); head[me] = 0; ss[me] = TRUST
}

/* The Acquire ends without the lock: the waiter is out of the line. */
inline give_up() {
  excuse(me); ahead[me] = 0; head[me] = 0; ss[me] = TRUST; wn[me] = 0; tries = 0
}

/* The join has ended: in line, unless the answer came after the place's
 * trust ended (then it has lost its place at once). A copy of the create
 * still delayed in the network can now only land after the key is deleted
 * (before, it gets 412): then it is nobody's ticket. (The model lets it
 * land as nobody's at any time: an extra ticket that nobody renews.) */
inline joined() {
  if :: sw == me -> so = 1 :: else fi;
  if
  :: TRUSTED(me) ->
     printf("w%d in line with ticket %d\n", me, wn[me]);
     tries = 0; wn[me] = 0;
     good[me] = 1;
     goto waiting
  :: else ->
     printf("w%d join: answered after its place's trust ended\n", me);
     tries = 0; wn[me] = 0;
     lose_place();
     goto join
  fi
}

/* A send of the ticket's create, and what the waiter hears. */
inline put_ticket() {
  if
  :: !tk[me] ->
     printf("w%d join: PUT ticket %d If-None-Match:* -> 200\n", me, wn[me]);
     tk[me] = 1; tn[me] = wn[me]; ta[me] = 0;
     joined()
  :: !tk[me] ->
     printf("w%d join: PUT ticket %d If-None-Match:* -> applied, answer lost\n", me, wn[me]);
     tk[me] = 1; tn[me] = wn[me]; ta[me] = 0
  :: !tk[me] && sw == 0 && !tk[0] ->
     printf("w%d join: PUT ticket %d If-None-Match:* -> delayed in the network\n", me, wn[me]);
     sw = me; sn = wn[me]
  :: !tk[me] ->
     printf("w%d join: PUT ticket %d If-None-Match:* -> lost on the way\n", me, wn[me])
  :: tk[me] ->                           /* the SDK's retry of our own create */
     printf("w%d join: PUT ticket %d If-None-Match:* -> 412\n", me, wn[me])
  fi;
  /* The outcome is unknown. */
#ifdef MUTANT_NO_READBACK
  printf("w%d MUTANT: takes the unknown outcome for joined\n", me);
  joined();
#endif
  goto readback
}

active [NW] proctype Waiter() {
  byte me = _pid - FIRSTW + 1;
  byte k, tries;
#if ACQUIRES > 0
  byte acquires;
#endif

  /* ================= an ordered Acquire: its first attempt (§5, §13) == */
attempt:
  atomic {
#if ACQUIRES > 0
    acquires < ACQUIRES -> acquires++;
#endif
    /* Step 2's LIST shows a non-empty line as a common prefix, and a LIST
     * of the line tells a stray key or a kept prefix from a ticket: one
     * atomic look at the line here, made before the create; for (f) the
     * fast path's join begins here. Steps 3-4 are the lock's test-and-set,
     * in the same step: free -> acquired; held -> HeldError, join. (Were
     * they apart, the lock could be taken in between, as the waiter without
     * order may take it at any time; the attempt would then join: the
     * same.) */
    d_step {
      ahead[me] = OTHERS(me);
      if
#ifndef MUTANT_NO_LINE_CHECK
      :: LINE_BLOCKS(me) ->
         printf("w%d attempt: LIST: the line is not empty: join\n", me);
         k = 0
#endif
      :: else ->
         if
         :: FREE_FOR(me) ->
            printf("w%d attempt: LIST: line empty (or not looked at); lock free: ACQUIRED\n", me);
            take(); acquired(); k = 1
         :: else ->
            printf("w%d attempt: LIST: line empty; lock held: join\n", me);
            k = 0
         fi
      fi
    };
    if :: k == 1 -> k = 0; goto holding :: else fi
  };

  /* ======================================================= joining (§13) == */
join:
  /* 1. LIST <name>/lock-line/ -> n = the highest number listed, live or
   * not, plus one (1 for an empty line). The join begins here. (A join
   * whose number would pass NT waits until it would not.) */
#ifndef MUTANT_NO_LIST_NUMBER
  atomic {
    HIGHEST < NT ->
    d_step {
      wn[me] = HIGHEST + 1;
      ahead[me] = OTHERS(me);
      printf("w%d join: LIST line: highest %d, draws %d\n", me, HIGHEST, wn[me])
    }
  };
#else
  atomic {
    seen[me] < NT ->
    d_step {
      wn[me] = seen[me] + 1;
      ahead[me] = OTHERS(me);
      printf("w%d join: MUTANT: no LIST; draws %d from its last view of the line\n", me, wn[me])
    }
  };
#endif
  /* 2. PUT <ticket> If-None-Match: * (a new key: its suffix is new). The
   * place is trusted from just before the create is first sent (ss). */
  atomic { ss[me] = 0; tries = 0; put_ticket() };
resend:                                  /* the same body again */
  atomic {
#ifdef MUTANT_TRUST_FROM_RESEND
    printf("w%d MUTANT: trusts its place from this send\n", me);
    ss[me] = 0;
#endif
    put_ticket()
  };
readback:
  atomic {
    /* Unknown outcome: read the key back. Our nonce: joined (unless the
     * answer came after the place's trust ended). Absent: our create has not
     * landed (yet): send the same body again, at most MAXTRY times (the SDK:
     * five). Absent after that, or the read-back fails too: the waiter gives
     * up and DELETEs the key (best effort; the model's DELETE is applied).
     * A copy of the create still in the network may land later. */
    if
    :: tk[me] ->
#ifdef MUTANT_TRUST_FROM_ANSWER
       printf("w%d MUTANT: trusts its place from the read-back's answer\n", me);
       ss[me] = 0;
#endif
       printf("w%d join: read back ticket %d: ours\n", me, wn[me]);
       joined()
    :: !tk[me] && tries < MAXTRY ->
       printf("w%d join: read back ticket %d: absent; send it again\n", me, wn[me]);
       tries++;
       goto resend
    :: printf("w%d join: read back ticket %d: absent, or no answer: gives up, DELETE it\n", me, wn[me]);
       if :: sw == me -> so = 1 :: else fi;
       delete_ticket(me); give_up();
       goto attempt
    fi
  };

  /* ======================================================= in line (§13) == */
waiting:
  do
  :: d_step {
       /* Heartbeat: PUT If-Match, while the place is trusted; the trust then
        * counts from its send. The model applies and answers it at its send
        * (the oldest ticket it can leave). One that fails, or lands unheard,
        * leaves the trust counting from the write before: the owner stops
        * trusting sooner than the ticket's age says, which only widens the
        * margin. */
       TRUSTED(me) && tk[me] ->
       printf("w%d heartbeat ticket %d -> 200\n", me, tn[me]);
       ta[me] = 0; ss[me] = 0
     }
  :: atomic {
       /* Its place is no longer trusted (its timer), or a heartbeat or LIST
        * found its ticket gone: it has lost its place. */
       !TRUSTED(me) || !tk[me] ->
       lose_place();
       goto join
     }
  :: d_step {
       /* Whose turn: LIST the line; DeleteObjects the lapsed tickets ahead
        * (LIST's Date - LastModified >= TV + slack); at the head if no live
        * ticket sorts before its own. (The model lets a LIST, and the head's
        * attempts, happen after the place's trust has ended: a waiter
        * checks, then may pause before it sends.) */
       tk[me] ->
       k = 0;
       do
       :: k <= NW ->
          if
          :: AHEAD1(k, me) && ta[k] >= LAPSE ->
#ifndef VARIANT_NO_LAPSE_DELETE
             printf("w%d LIST line: ticket %d (slot %d) lapsed: DeleteObjects\n", me, tn[k], k);
             delete_ticket(k)
#else
             printf("w%d LIST line: ticket %d (slot %d) lapsed: skipped (VARIANT: not deleted)\n", me, tn[k], k)
#endif
          :: else
          fi;
          k++
       :: else -> break
       od;
       k = 0;
#ifdef MUTANT_NO_LIST_NUMBER
       seen[me] = HIGHEST;
#endif
#ifndef VARIANT_NO_LAPSE_DELETE
#define LIVE_AHEAD (TURN_AHEAD1(0, me) || TURN_AHEAD1(1, me) || TURN_AHEAD1(2, me) || TURN_AHEAD1(3, me))
#else
#define LIVE_AHEAD1(j) (TURN_AHEAD1(j, me) && ta[j] < LAPSE)
#define LIVE_AHEAD (LIVE_AHEAD1(0) || LIVE_AHEAD1(1) || LIVE_AHEAD1(2) || LIVE_AHEAD1(3))
#endif
       if
       :: !LIVE_AHEAD ->
          printf("w%d LIST line: at the head with ticket %d\n", me, tn[me]);
          head[me] = 1;
#if PROPERTY == 0 || PROPERTY == 2
          jumped = ahead[me];
          if
          :: jumped != 0 ->
             printf("OUT OF TURN: w%d at the head before", me); print_set(jumped);
             printf(", in line since before w%d's join began\n", me)
          :: else
          fi;
          assert(jumped == 0);
#endif
#ifdef MUTANT_EARLY_DELETE
          printf("w%d MUTANT: DELETE its ticket on reaching the head\n", me);
          delete_ticket(me)
#endif
       :: else ->
          printf("w%d LIST line: not at the head (ticket %d)\n", me, tn[me]);
          head[me] = 0
       fi
     }
  :: atomic {
       /* The head attempts the lock (§5; its own attempts ignore the line);
        * on acquiring it DELETEs its ticket. (A DELETE that fails leaves a
        * ticket that lapses, as a crashed waiter's does.) */
#ifndef MUTANT_NO_TURN
       head[me] && FREE_FOR(me) ->
#else
       FREE_FOR(me) ->
#endif
       d_step {
         printf("w%d ACQUIRED (ticket %d); DELETE ticket\n", me, tn[me]);
         take(); acquired();
         delete_ticket(me); head[me] = 0; ss[me] = TRUST
       };
       goto holding
     }
  :: atomic {
       /* Leaving: the context ends or the wait times out: DELETE the ticket
        * (with a context that outlives the caller's). */
       d_step {
         printf("w%d gives up: DELETE ticket %d\n", me, tn[me]);
         delete_ticket(me); give_up()
       };
       goto attempt
     }
  od;

holding:
  atomic {
    printf("w%d releases\n", me);
    if :: SHR(me) -> readers = readers & ~(1 << me) :: else -> holder = 0 fi;
    goto attempt
  }
}

/* ---------------------------------------------- the claim (h) is not */
#ifdef CLAIM_ONE_HEAD
#define HEAD_TRUSTING(w) (head[w] && tk[w] && TRUSTED(w))
active proctype OneHead() {
  byte heads;
end:
  atomic {
    (HEAD_TRUSTING(1) + HEAD_TRUSTING(2) + HEAD_TRUSTING(3) > 1) ->
    heads = HEAD_TRUSTING(1) + HEAD_TRUSTING(2) + HEAD_TRUSTING(3);
    printf("TWO HEADS:");
    if :: HEAD_TRUSTING(1) -> printf(" w1") :: else fi;
    if :: HEAD_TRUSTING(2) -> printf(" w2") :: else fi;
    if :: HEAD_TRUSTING(3) -> printf(" w3") :: else fi;
    printf(" are at the head, trusting their places\n");
    assert(heads <= 1)
  }
}
#endif
