/*
 * line.pml: a Spin model of ordered waiting, the line (s3lock/PROTOCOL.md §13).
 *
 * One lock; three ordered waiters (FIFO) and one waiter without order; the
 * line's tickets in a store that applies each request atomically (A1, A2);
 * a network that may delay a ticket's create and deliver it late; a ticker
 * that advances the store's clock. The lock itself is not modelled again
 * (s3lock.pml does that): §13 says the line changes who tries, never what
 * trying does, so here the lock is an atomic test-and-set on a free lock
 * (`holder`), which the waiter without order may also take at any time.
 * Section numbers (§) are PROTOCOL.md's; README.md in this directory maps
 * the model to the protocol and lists what it leaves out.
 *
 * Checked, as assertions (pan compiled with -DSAFETY, exhaustive search):
 *   (f) first come, first served (§13 "The ordering guarantee"): if waiter
 *       A's join ended before waiter B's join began, and A has not since
 *       lost its place, given up or crashed, then B does not acquire the
 *       lock before A does. Waiter, at every acquisition:
 *       assert(ahead[me] == 0), ahead[] defined below.
 *   (h) no waiter attempts the lock, as the head, while a waiter whose join
 *       ended before its own join began is still in line and has not lost
 *       its place, given up or crashed. Waiter, when a line LIST makes it
 *       the head: assert(ahead[me] == 0). (h) implies (f) for acquisitions
 *       at the head; (f) also covers the fast path (an attempt that finds
 *       the line empty).
 * What (h) is not: "at most one waiter believes it is at the head while it
 * trusts its place" is false of §13, and is not claimed. Two joins that
 * overlap may draw the same number, or one may draw a lower number and have
 * its create land after the other listed the line and found itself at the
 * head: both are then at the head, trusting their places, and both attempt
 * the lock (the lock's own mutual exclusion decides). §13 allows it ("joins
 * that overlap are ordered either way"). -DCLAIM_ONE_HEAD asserts the false
 * claim; check.sh requires its counterexample.
 *
 * "Lost its place" means what §13 says a waiter must do to lose it: not
 * renew its ticket in time, so that its trust in its place ends (a pause, a
 * crash, a heartbeat answered late). A ticket that disappears, or is skipped,
 * while its owner still trusts its place is a violation of (f), however and
 * whenever the owner finds out.
 *
 * Mutants: this file compiled with one define (spin -a -DMUTANT_X). Each
 * removes one mechanism of §13; check.sh requires a counterexample to (f):
 *   MUTANT_NO_LINE_CHECK      an ordered attempt takes a free lock without
 *                             looking whether the line is empty ("Free lock,
 *                             non-empty line")
 *   MUTANT_EARLY_LAPSE        observers judge a ticket lapsed without the
 *                             slack: at Date - LastModified >= ticketValidity,
 *                             before its owner stops trusting its place
 *                             ("Staying in line")
 *   MUTANT_NO_LIST_NUMBER     a joiner draws its number without listing the
 *                             line: the highest number of the last line it
 *                             listed (a stale view) plus one ("Joining", 1)
 *   MUTANT_TRUST_FROM_ANSWER  a joiner whose create's outcome was unknown
 *                             counts its place's trust from the read-back
 *                             that found its ticket, not from the create's
 *                             send ("trusts its place as a holder trusts a
 *                             lease (§6)": from `sent`)
 *   MUTANT_NO_READBACK        a create whose outcome is unknown is taken as
 *                             joined, without reading the ticket back
 *                             ("Joining", 2)
 *   MUTANT_EARLY_DELETE       the head deletes its ticket when it becomes the
 *                             head, before it has acquired ("Whose turn":
 *                             "when it acquires, it deletes its ticket")
 *   MUTANT_NO_TURN            a waiter behind the head attempts the lock
 *                             ("Whose turn": only the head attempts)
 * and the boundary run -DMARGIN=0 (a place trusted without the margin, with
 * the clock drift the margin exists for).
 * Variants that remove a mechanism and still verify (§13 needs them for
 * other reasons than (f); README.md):
 *   VARIANT_LIVE_NUMBER       a joiner draws the highest *live* number plus
 *                             one (§13: "live or not")
 *   VARIANT_NO_TIE_BREAK      equal numbers are not ordered by the key's
 *                             suffix: a waiter is at the head when no live
 *                             ticket has a smaller number
 *
 * Time (§6, §13 "Staying in line"): as in s3lock.pml. The store's clock
 * advances in ticks (process Ticker); the model keeps differences of two
 * readings of one clock, not timestamps: ta[k] (a ticket's age, Date minus
 * LastModified) and ss[w] (ticks since waiter w sent the write its trust in
 * its place counts from). Both stop at the largest value a rule compares
 * them with.
 *   - An observer's Date - LastModified may exceed the true age by RES (the
 *     one-second resolution, §6); the model takes the worst case: a ticket
 *     may be judged lapsed at true age TV + SLACK - RES (LAPSE).
 *   - Every waiter has the slowest clock A5 allows: over a ticket's validity
 *     it measures DRIFT ticks less than the store does, so it trusts its
 *     place until TV - MARGIN + DRIFT ticks after `sent` (TRUST).
 *
 * Trails. Every step prints a line (printf), which pan ignores and a replay
 * (spin -T -t) shows: check.sh prints each counterexample that way.
 */

/* ---------------------------------------------------------------- sizes */

#define NW 3            /* ordered waiters, ids 1..3; the line's ticket slots
                           are 0..3 (below); the macros below spell out 0..3 */
#define UW 4            /* the waiter without order */
#define FIRSTW 3        /* _pid of waiter 1 (after Ticker, Network, Unordered) */
#ifndef UACQ
#define UACQ 2          /* acquisitions by the waiter without order */
#endif
#ifndef JOINS
#define JOINS 0
#endif
#ifndef ACQUIRES
#define ACQUIRES 0      /* Acquires per waiter (0: any number) */
#endif
#ifndef NT
#define NT 3            /* ticket numbers 1..NT; keeps the model finite */
#endif

/* ------------------------------------------------ time, in store ticks */
/* The values of s3lock.pml, for the same argument (§6), with ticketValidity
 * for validityMs. A tick is not a second. */
#ifndef TV
#define TV 2            /* ticketValidity */
#endif
#ifndef MARGIN
#define MARGIN 1        /* a place is trusted until sent + TV - margin */
#endif
#ifndef DRIFT
#define DRIFT 1         /* how much less than TV a waiter's clock may measure */
#endif
#ifndef SLACK
#define SLACK 1         /* serverSlack: lapsed once Date - LastModified >= TV + slack */
#endif
#ifndef RES
#define RES 1           /* how much Date - LastModified may exceed the true age */
#endif

#define TRUST (TV - MARGIN + DRIFT)   /* ticks after `sent` a waiter trusts its place */
#ifndef MUTANT_EARLY_LAPSE
#define LAPSE (TV + SLACK - RES)      /* true age at which a ticket may be judged lapsed */
#else
#define LAPSE (TV - RES)              /* MUTANT: no serverSlack */
#endif
/* The argument, in ticks (TV=2 MARGIN=1 DRIFT=1 SLACK=1 RES=1): LAPSE >=
 * TRUST (2 >= 2): when anyone may judge a ticket lapsed (true age of its
 * latest write >= LAPSE, so at least LAPSE since that write's `sent`), its
 * owner has stopped trusting its place. -DMARGIN=0 breaks it by a tick;
 * MUTANT_EARLY_LAPSE is -DSLACK=0. */

/* ------------------------------------------------------------ the store */
/* The line's tickets (§13 "Keys"). Slot w (1..3) is the ticket of waiter w's
 * current join; slot 0 is a ticket whose create landed after its waiter had
 * given up and deleted the key (§13 "Leaving"): nobody's. A ticket is
 * present when tk[k]; its key is <name>/lock-line/<tn[k]>-fifo-<suffix>.json,
 * where the random suffix is the bit tx[k] drawn at the join, then the slot
 * (standing for the rest of the random digits): keys sort by (tn, tx, k). Its
 * payload is reduced to what the protocol decides on: who owns it (the slot)
 * and when it was last written: ta[k] is the store's clock minus its
 * LastModified. The ETag and the `write` id only tell a waiter's own writes
 * apart; here a waiter's writes are answered one at a time. */
bit  tk[NW + 1];
byte tn[NW + 1];
bit  ox;               /* the suffix of slot 0's ticket sorts after the waiters' */
byte ta[NW + 1];

#ifndef VARIANT_NO_TIE_BREAK
#define RANK(k) (k == 0 -> (ox -> NW + 1 : 0) : k)
#define BEFORE(j, k) (tn[j] < tn[k] || (tn[j] == tn[k] && RANK(j) < RANK(k)))
#else
#define BEFORE(j, k) (tn[j] < tn[k])  /* VARIANT: equal numbers are not ordered */
#endif
/* A live ticket of someone else ahead of slot me's. */
#define AHEAD1(k, me) (k != me && tk[k] && BEFORE(k, me))
#define AHEAD(me) (AHEAD1(0, me) || AHEAD1(1, me) || AHEAD1(2, me) || AHEAD1(3, me))
#define LINE_EMPTY (!tk[0] && !tk[1] && !tk[2] && !tk[3])
#define NUM(k) (tk[k] -> tn[k] : 0)
#define MAX2(a, b) (a > b -> a : b)
#define HIGHEST MAX2(MAX2(NUM(0), NUM(1)), MAX2(NUM(2), NUM(3)))
#define LIVENUM(k) ((tk[k] && ta[k] < LAPSE) -> tn[k] : 0)
#define HIGHEST_LIVE MAX2(MAX2(LIVENUM(0), LIVENUM(1)), MAX2(LIVENUM(2), LIVENUM(3)))

inline delete_ticket(k) {
  tk[k] = 0; tn[k] = 0; ta[k] = 0;
  if :: k == 0 -> ox = 0 :: else fi
}

/* ------------------------------------------------------------- the lock */
/* §5 is abstracted to one atomic test-and-set: an attempt on a free lock
 * acquires it, an attempt on a held lock is a HeldError. (The lock's own
 * timing, lapse, ambiguity and epochs are s3lock.pml's.) */
byte holder;           /* 0: free; 1..3: that waiter; UW: the waiter without order */

/* ---------------------------------------------------------- the network */
/* One ticket create at a time may be delayed (a slow proxy, a request the
 * SDK retried) and reach the store later, or never. */
byte sw;               /* its waiter (0: none) */
byte sn;               /* its ticket number */
bit  so;               /* its waiter has given up and deleted the key */

/* ---------------------------------------------------------- the waiters */
byte ss[NW + 1] = TRUST; /* ticks since w sent the write its place's trust counts from */
bit  head[NW + 1];     /* w's latest line LIST found no live ticket ahead of its own */
byte wn[NW + 1];       /* the number w's current join drew */
#ifdef MUTANT_NO_LIST_NUMBER
byte seen[NW + 1];     /* the highest number w saw at its latest line LIST */
#endif
#define TRUSTED(w) (ss[w] < TRUST)

/* ------------------------------------------- the properties' ghost state */
/* good[w]: w's join has ended (it believes it is in line), and since then w
 * has not acquired, given up, crashed, or stopped trusting its place.
 * ahead[b]: the waiters that were good when b's join began (its line LIST;
 * for the fast path, the LIST of its attempt) and have stayed good since. A
 * waiter leaves every ahead[] when it stops being good (excuse). (f): at
 * b's acquisition ahead[b] is empty; (h): at b's becoming the head too. */
bit  good[NW + 1];
byte ahead[NW + 1];
#define GOODMASK ((good[1] << 1) | (good[2] << 2) | (good[3] << 3))

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
          printf("network: w%d's delayed create of ticket %d lands after w%d gave up: nobody's\n", sw, sn, sw);
          tk[0] = 1; tn[0] = sn; ta[0] = 0;
          if :: ox = 0 :: ox = 1 fi
       :: !so ->
          printf("network: w%d's delayed create of ticket %d lands (200, unheard)\n", sw, sn);
          tk[sw] = 1; tn[sw] = sn; ta[sw] = 0
       :: printf("network: w%d's delayed create of ticket %d is lost\n", sw, sn)
       fi;
       sw = 0; sn = 0; so = 0
     }
  od
}

/* ---------------------------------------------------- the waiter without order */
/* Takes a free lock whenever it finds one, and ignores the line (§13 "Free
 * lock, non-empty line"). */
#ifndef NOU
active proctype Unordered() {
  byte n;
end:
  do
  :: atomic { holder == 0 && n < UACQ -> n++; holder = UW; printf("u ACQUIRED (without order)\n") };
     atomic { holder = 0; printf("u releases\n") }
  od
}
#else
active proctype Unordered() { skip }
#endif

/* ----------------------------------------------------------- the waiter */
/* Each atomic block of a waiter is one step: one request to the store (or
 * one attempt on the lock), applied atomically, with the waiter's decision on
 * its answer. Between two steps any other process may run and any number of
 * ticks may pass: that is how a waiter is slow or paused. A waiter that
 * crashes is one that never takes another step: its ticket lapses. */

/* (f), at an acquisition by waiter me. */
inline acquired() {
  if
  :: ahead[me] != 0 ->
     printf("OUT OF ORDER: w%d acquires before waiter(s) %d%d%d (1: joined first, still in line)\n",
            me, (ahead[me] >> 1) & 1, (ahead[me] >> 2) & 1, (ahead[me] >> 3) & 1)
  :: else
  fi;
  assert(ahead[me] == 0);
  excuse(me); ahead[me] = 0
}

active [NW] proctype Waiter() {
  byte me = _pid - FIRSTW + 1;
  byte k;
#if ACQUIRES > 0
  byte acquires;
#endif
#if JOINS > 0
  byte joins;
#endif

  /* ============== an ordered Acquire: its first attempt (§5, §13) == */
attempt:
  atomic {
#if ACQUIRES > 0
    acquires < ACQUIRES -> acquires++;
#endif
    /* Step 2's LIST shows the line as a common prefix: "an ordered attempt
     * learns whether anyone waits at no extra request". For (f), this LIST
     * is where a fast-path acquisition's join begins. Steps 3-4 are the
     * lock's test-and-set, in the same step: free -> acquired, held ->
     * HeldError. (Apart, the lock could be taken between them, as the
     * waiter without order may take it at any time, and this attempt would
     * join then: the same.) */
    ahead[me] = GOODMASK & ~(1 << me);
    if
#ifndef MUTANT_NO_LINE_CHECK
    :: !LINE_EMPTY ->
       printf("w%d attempt: LIST: the line is not empty: join\n", me)
#endif
    :: else ->
       if
       :: holder == 0 ->
          printf("w%d attempt: LIST: the line is empty; ACQUIRED\n", me);
          holder = me; acquired(); goto holding
       :: else ->
          printf("w%d attempt: LIST: the line is empty; held: join\n", me)
       fi
    fi
  };

  /* ============================================ joining (§13) == */
join:
  atomic {
    /* 1. LIST <name>/lock-line/ -> n = the highest number listed, live or
     * not, plus one. The join begins here. (A join whose number would pass
     * NT waits until it would not.) */
#if JOINS > 0
    joins < JOINS -> joins++;
#endif
#if !defined(MUTANT_NO_LIST_NUMBER) && !defined(VARIANT_LIVE_NUMBER)
    HIGHEST < NT ->
    wn[me] = HIGHEST + 1;
    printf("w%d join: LIST line: highest %d; draws %d\n", me, HIGHEST, wn[me]);
#elif defined(VARIANT_LIVE_NUMBER)
    HIGHEST_LIVE < NT ->
    wn[me] = HIGHEST_LIVE + 1;
    printf("w%d join: LIST line: highest live %d; draws %d (VARIANT)\n", me, HIGHEST_LIVE, wn[me]);
#else
    seen[me] < NT ->
    wn[me] = seen[me] + 1;
    printf("w%d join: MUTANT: no LIST; draws %d from its last view of the line\n", me, wn[me]);
#endif
    ahead[me] = GOODMASK & ~(1 << me)
  };
  atomic {
    /* 2. PUT <ticket> If-None-Match: * (the key is new: its suffix is). The
     * place is trusted from just before this send (ss). */
    ss[me] = 0;
    if
    :: printf("w%d join: PUT ticket %d -> 200; in line\n", me, wn[me]);
       tk[me] = 1; tn[me] = wn[me]; ta[me] = 0; wn[me] = 0;
       good[me] = 1;
       goto waiting
    :: printf("w%d join: PUT ticket %d -> applied, answer lost\n", me, wn[me]);
       tk[me] = 1; tn[me] = wn[me]; ta[me] = 0
    :: sw == 0 && !tk[0] ->
       printf("w%d join: PUT ticket %d -> delayed in the network\n", me, wn[me]);
       sw = me; sn = wn[me]
    :: printf("w%d join: PUT ticket %d -> lost on the way\n", me, wn[me])
    fi;
    /* The outcome is unknown. */
#ifdef MUTANT_NO_READBACK
    printf("w%d MUTANT: takes the unknown outcome for joined\n", me);
    wn[me] = 0; good[me] = 1;
    goto waiting
#endif
  };
  atomic {
    /* Read the key back. Our nonce: joined, unless the place's trust has
     * already ended (the answer came too late): lost. Absent (our create has
     * not landed, or never will), or the read-back fails too: the waiter
     * gives up and deletes the key (best effort; the model's DELETE is
     * applied). (Sending the same body again is not modelled: it only delays
     * the give-up, and a late copy of it is the delayed create above.) */
    if
    :: tk[me] ->
#ifdef MUTANT_TRUST_FROM_ANSWER
       printf("w%d MUTANT: trusts its place from the read-back's answer\n", me);
       ss[me] = 0;
#endif
       wn[me] = 0;
       if
       :: TRUSTED(me) ->
          printf("w%d join: read back ticket %d: ours; in line\n", me, tn[me]);
          good[me] = 1;
          goto waiting
       :: else ->
          printf("w%d join: read back ticket %d: ours, but its place's trust has ended\n", me, tn[me]);
          goto lost
       fi
    :: printf("w%d join: read back ticket %d: absent or failed; gives up, DELETE it\n", me, wn[me]);
       if :: sw == me -> so = 1 :: else fi;
       delete_ticket(me); excuse(me);
       goto gaveup
    fi
  };

  /* ========================================== in line (§13) == */
waiting:
  do
  :: atomic {
       /* Heartbeat: PUT If-Match, while trusted; counts from its send. The
        * model applies and answers it at its send (the oldest object it can
        * leave). One that does not land, or lands unheard, leaves the trust
        * counting from the previous write: the owner stops trusting sooner
        * than the ticket's age says, which only widens the margin. */
       TRUSTED(me) && tk[me] ->
       printf("w%d heartbeat ticket %d -> 200\n", me, tn[me]);
       ta[me] = 0; ss[me] = 0
     }
  :: atomic {
       /* Its place is no longer trusted, or a heartbeat or LIST found its
        * ticket gone: it has lost its place. */
       !TRUSTED(me) || !tk[me] -> goto lost
     }
  :: atomic {
       /* Whose turn: LIST the line; DeleteObjects the lapsed tickets ahead
        * (LIST's Date - LastModified >= TV + slack); at the head if no live
        * ticket sorts before its own. (A LIST may be sent after the trust
        * ended: the model does not make the waiter check first.) */
       tk[me] ->
       k = 0;
       do
       :: k <= NW ->
          if
          :: AHEAD1(k, me) && ta[k] >= LAPSE ->
             printf("w%d LIST line: ticket %d (slot %d) lapsed: DeleteObjects\n", me, tn[k], k);
             delete_ticket(k)
          :: else
          fi;
          k++
       :: else -> break
       od;
       k = 0;
#ifdef MUTANT_NO_LIST_NUMBER
       seen[me] = HIGHEST;
#endif
       if
       :: !AHEAD(me) ->
          printf("w%d LIST line: at the head with ticket %d\n", me, tn[me]);
          head[me] = 1;
          if
          :: ahead[me] != 0 ->
             printf("HEAD OUT OF ORDER: w%d at the head before waiter(s) %d%d%d (1: joined first, still in line)\n",
                    me, (ahead[me] >> 1) & 1, (ahead[me] >> 2) & 1, (ahead[me] >> 3) & 1)
          :: else
          fi;
          assert(ahead[me] == 0);              /* property (h) */
#ifdef MUTANT_EARLY_DELETE
          printf("w%d MUTANT: deletes its ticket on becoming the head\n", me);
          delete_ticket(me)
#endif
       :: else ->
          printf("w%d LIST line: not at the head (ticket %d)\n", me, tn[me]);
          head[me] = 0
       fi
     }
  :: atomic {
       /* The head attempts the lock (§5; its attempts ignore the line); on
        * acquiring it deletes its ticket. (A DELETE that fails leaves a
        * ticket that lapses, as a crashed waiter's does.) */
#ifndef MUTANT_NO_TURN
       head[me] && holder == 0 ->
#else
       holder == 0 ->
#endif
       printf("w%d ACQUIRED (ticket %d); DELETE ticket\n", me, tn[me]);
       holder = me; acquired();
       delete_ticket(me); head[me] = 0; ss[me] = TRUST;
       goto holding
     }
  :: atomic {
       /* Leaving: the context ends or the wait times out: DELETE the ticket
        * (with a context that outlives the caller's). */
       printf("w%d gives up: DELETE ticket %d\n", me, tn[me]);
       delete_ticket(me); excuse(me);
       goto gaveup
     }
  od;

lost:
  atomic {
    /* Lost its place (§13): delete the old ticket, join again at the back. */
    printf("w%d lost its place: DELETE ticket, join again\n", me);
    delete_ticket(me); head[me] = 0; ss[me] = TRUST;
    goto join
  };

gaveup:
  atomic {
    printf("w%d: Acquire ends without the lock\n", me);
    ahead[me] = 0; head[me] = 0; ss[me] = TRUST; wn[me] = 0;
    goto attempt
  };

holding:
  atomic {
    printf("w%d releases\n", me);
    holder = 0;
    goto attempt
  }
}

/* -------------------------------------------------------- claim (h) above */
#ifdef CLAIM_ONE_HEAD
#define HEAD_TRUSTING(w) (head[w] && good[w])
active proctype OneHead() {
  byte heads;
end:
  atomic {
    (HEAD_TRUSTING(1) + HEAD_TRUSTING(2) + HEAD_TRUSTING(3) > 1) ->
    heads = HEAD_TRUSTING(1) + HEAD_TRUSTING(2) + HEAD_TRUSTING(3);
    printf("TWO HEADS: w1 %d, w2 %d, w3 %d (1: at the head, trusting its place)\n",
           HEAD_TRUSTING(1), HEAD_TRUSTING(2), HEAD_TRUSTING(3));
    assert(heads <= 1)
  }
}
#endif
