/*
 * s3lock.pml: a Spin model of the s3lock protocol (s3lock/PROTOCOL.md).
 *
 * One lock; three clients; a store that owns the lock's epoch objects and
 * applies each request atomically (A1, A2); a network that may delay a
 * create and deliver it late; a ticker that advances the store's clock.
 * Section numbers (§) are PROTOCOL.md's; README.md in this directory maps
 * the model to the protocol and lists what it leaves out.
 *
 * Checked, as assertions (pan compiled with -DSAFETY, exhaustive search):
 *   (a) mutual exclusion of trusted leases (§1 guarantee 1): never two
 *       clients that each trust a lease of the lock at once.
 *       Process MutualExclusion: assert(trusted_leases <= 1).
 *   (b) epochs never reused (§1 guarantee 2): every acquisition gets an
 *       epoch greater than every earlier acquisition's, so no two
 *       acquisitions get the same epoch.
 *       Client, step 6: assert(e > last_acquired).
 *   (c) no orphans from ambiguity (§1 guarantee 3): once a client has ended
 *       an attempt without a lease (after abandoning what it may have
 *       created), no epoch object it created holds the lock for nobody.
 *       Defined precisely at check_orphan below: assert(!orphaned).
 *
 * Mutants: this file compiled with one define (spin -a -DMUTANT_X). Each
 * removes one mechanism; check.sh requires a counterexample to the property
 * named, checking that property alone (-DPROPERTY, below):
 *   MUTANT_NO_LAPSE_CHECK     step 3 skipped: the next epoch is created
 *                             without checking that the newest one is
 *                             released or lapsed (hazard 1)           -> (a)
 *   MUTANT_NO_READBACK        step 4: an unknown outcome (a 412 that may
 *                             answer the SDK's retry of our own write, a
 *                             5xx, a timeout, a lost answer) is taken as
 *                             "someone else created it", the article's
 *                             reading of a 412: no read-back, so no abandon
 *                             (hazard 2). A create that did land then holds
 *                             the lock for nobody.                     -> (c)
 *                             The other wrong reading, "we created it",
 *                             breaks (a) whenever the 412 was another
 *                             client's create; the read-back by nonce
 *                             prevents both. The model takes the first: it
 *                             is the one guarantee 3 is about.
 *   MUTANT_NO_RELIST          step 5 skipped: a slow attempt does not list
 *                             again, so a contender that paused between its
 *                             GET and its PUT re-creates an epoch that
 *                             cleanup deleted, and holds it while the real
 *                             holder does (hazard 4)                  -> (a)
 *                             (and its acquisition reuses an epoch:  -> (b))
 * and two more, for the other halves of the same mechanisms:
 *   MUTANT_NO_CLEANUP_AGE     §7 without the age condition: every epoch but
 *                             the newest may be deleted at once; then even
 *                             a quick attempt, which step 5 rightly leaves
 *                             unchecked, can re-create a deleted epoch -> (b)
 *   MUTANT_ABANDON_NO_CREATE  abandon only marks its own object released;
 *                             it does not create an absent key as released,
 *                             so a delayed copy of the create lands after the
 *                             client gave up and holds the lock for nobody
 *                                                                     -> (c)
 * and one for the direct create after a poll (§5 "Waiting"):
 *   MUTANT_DIRECT_NO_LIST     a waiter whose poll read the watched epoch n
 *                             released creates n+1 without heeding the LIST
 *                             it sends with that create: paused between its
 *                             poll and its create while others took n+1,
 *                             n+2, ... and cleanup deleted n+1, it re-creates
 *                             n+1 beside the real holder (checked with
 *                             -DNC=2 -DNE=4: the deletion needs two epochs
 *                             above n, so the model, whose default is NE=3,
 *                             also runs at -DNC=2 -DNE=5)             -> (a)
 *
 * Time (§6, §7). The store's clock advances in ticks (process Ticker). Every
 * rule of the protocol compares two readings of one clock: the store's age
 * of an object (Date - Last-Modified, from one response), or a client's own
 * elapsed time since it noted `start` (step 1) or `sent` (step 4, Renew).
 * So the model keeps those differences rather than timestamps: age[e],
 * el[c] and ss[c] count the ticks since their event and stop at the largest
 * value any rule compares them with. The store's clock `now` is implicit
 * (each counter is `now` minus the time of its event), time has no horizon,
 * and the state space is still finite.
 *   - An observer's Date - Last-Modified may exceed the true age by RES
 *     (one-second resolution, §6). The model takes the worst case: it may
 *     judge a lease lapsed at true age V + SLACK - RES (LAPSE), and a
 *     successor old enough for cleanup at true age CA - RES (CLEAN).
 *   - A client's clock may run slow or fast (A5). Every client gets the
 *     slowest clock allowed, the worst case: over a lease it measures DRIFT
 *     ticks less than the store's clock does, so it trusts its lease until
 *     V - MARGIN + DRIFT ticks after `sent` (ss[c] < TRUST). A faster clock
 *     only makes a holder stop trusting sooner, which the model has anyway
 *     (a holder may stop using its lease at any step). Over the attempt
 *     window the drift A5 allows (0.2 ms in 2 s) is far below a tick, so
 *     step 5 measures el exactly.
 *
 * Trails. Every step prints a line (printf), which pan ignores and a replay
 * (spin -T -t) shows: check.sh prints each counterexample that way.
 */

/* ---------------------------------------------------------------- sizes */

#ifndef NC
#define NC 3            /* clients, ids 1..NC (0: none); 2 or 3 */
#endif
#ifndef NE
#define NE 3            /* MaxEpoch (§2): epochs 1..NE; keeps the model finite */
#endif
#ifndef DIRECT_CLIENT
#define DIRECT_CLIENT 1 /* the client that creates directly after a poll (§5
                           "Waiting"); the others attempt again (0: none) */
#endif
#ifndef MAXTRY
#define MAXTRY 0        /* step 4: sends of the same body after the first (the
                           SDK's four only delay the abandon; -DMAXTRY=1 checks
                           one, in about three times the states) */
#endif

/* ---------------------------------------------------------- properties */
/* -DPROPERTY=1, 2 or 3 checks only (a), (b) or (c); 0 checks all three. */
#ifndef PROPERTY
#define PROPERTY 0
#endif

/* ------------------------------------------------ time, in store ticks */
/* The smallest values for which every term of the timing argument is
 * present (non-zero drift and resolution error) and the inequalities the
 * argument needs hold. A tick is not a second. */

#ifndef V
#define V 2             /* validityMs */
#endif
#ifndef MARGIN
#define MARGIN 1        /* safety margin: trusted until sent + V - margin (§6) */
#endif
#ifndef DRIFT
#define DRIFT 1         /* how much less than V a client's clock may measure */
#endif
#ifndef SLACK
#define SLACK 1         /* serverSlack: lapsed once Date - Last-Modified >= V + slack */
#endif
#ifndef RES
#define RES 1           /* how much Date - Last-Modified may exceed the true age */
#endif
#ifndef AW
#define AW 0            /* attemptWindow (step 5) */
#endif
#ifndef CA
#define CA (AW + SLACK + 1)  /* cleanupAge = attemptWindow + serverSlack + 1 s (§7) */
#endif

#define LAPSE (V + SLACK - RES)  /* true age at which a lease may be judged lapsed */
#define CLEAN (CA - RES)         /* true age at which a successor may be judged
                                    old enough for cleanup */
#define TRUST (V - MARGIN + DRIFT)  /* ticks after `sent` that a holder trusts */
/* The argument, in ticks (V=2 MARGIN=1 DRIFT=1 SLACK=1 RES=1 AW=0 CA=2):
 *   §6  LAPSE >= TRUST (2 >= 2): when anyone may judge a lease lapsed (true
 *       age of its latest write >= LAPSE, so at least LAPSE since that
 *       write's `sent`), its holder has stopped trusting it.
 *   §7  CLEAN > AW (1 > 0): an attempt that step 5 does not check had its
 *       create applied within AW of its LIST (here: before the clock
 *       ticked); an epoch is deleted no sooner than CLEAN after its
 *       successor, created after that LIST, was last written.
 * MARGIN cancels DRIFT and SLACK cancels RES exactly, with nothing to spare:
 * check.sh's boundary runs (-DMARGIN=0; -DSLACK=0 -DCA=2) show that one tick
 * less of either breaks (a); MUTANT_NO_CLEANUP_AGE (CLEAN = 0) does the same
 * for CA. */
#define ELCAP (AW + 1)
#define AGECAP (LAPSE > CLEAN -> LAPSE : CLEAN)

#define TRUSTED(c) (lease[c] != 0 && ss[c] < TRUST)
#if NC == 3
#define TRUSTED3 TRUSTED(3)
#else
#define TRUSTED3 0
#endif

/* ------------------------------------------------------------ the store */
/* Epoch object e (key <name>/lock-e, §2) is absent when own[e] == 0. Its
 * payload (§3) is reduced to what the protocol decides on: the nonce (the
 * creating client's id: a client's attempts target ever larger epochs, so
 * client and epoch identify an acquisition) and `expired` (rel). The ETag,
 * a function of the body, is then (own, rel): the `write` id that makes
 * every write's ETag new only tells a holder's own writes apart, and here
 * a holder's writes are answered one at a time (Renew below). age[e] is the
 * store's clock minus the object's Last-Modified. */
byte own[NE + 1];
bit  rel[NE + 1];
byte age[NE + 1];

/* ---------------------------------------------------------- the clients */
byte lease[NC + 1];    /* epoch of the lease client c holds (0: none)         */
byte ss[NC + 1];       /* ticks since c sent the write its trust counts from  */
byte el[NC + 1];       /* ticks since c's attempt started (step 1)            */
byte cre[NC + 1];      /* epoch c's current attempt creates (0: none)         */
byte stray_c, stray_e; /* a create of epoch stray_e by client stray_c, delayed
                          in the network (stray_c == 0: none)                 */
byte last_acquired;    /* epoch of the latest acquisition, for (b)            */

/* The store applies a create (If-None-Match: * already checked by the
 * caller). A copy of it still delayed in the network will get 412 whenever
 * it arrives, so it is dropped. (Were the key deleted before that copy
 * arrived, it would re-create an epoch below the newest; its client, if
 * still waiting, would find its nonce there, exactly as if it had paused and
 * sent its create only then, which the model has.) */
inline store_create(e, c, r) {
  own[e] = c; rel[e] = r; age[e] = 0;
  if
  :: stray_c != 0 && stray_e == e -> stray_c = 0; stray_e = 0
  :: else
  fi;
  /* The epoch below, if it was the newest, no longer is: from now on only
   * cleanup reads its age, and only compares it with CLEAN. */
  if
  :: e > 1 && age[e - 1] > CLEAN -> age[e - 1] = CLEAN
  :: else
  fi
}

/* LIST: the newest epoch (0: none). */
inline newest(x, k) {
  k = NE;
  do
  :: k > 0 && own[k] == 0 -> k--
  :: else -> break
  od;
  x = k;
  k = 0
}

/* Property (c). Epoch object e is ORPHANED when it is the lock's newest
 * epoch object, it is not released, and the client c whose nonce it carries
 * neither holds a lease on it (lease[c] == e) nor is still in the attempt
 * that creates it (cre[c] == e): c never learned that it created it, or gave
 * up on it, so nobody will release it or knows that it holds the lock; it
 * holds the lock for nobody until it lapses. An object can become orphaned
 * only when its creator ends an attempt (Client, end_attempt) or when a
 * delayed create lands (Network): no object becomes the newest, or
 * unreleased, any other way. Both places check it. */
inline check_orphan(c, e, x, k) {
  newest(x, k);
  orphaned = (own[e] == c && !rel[e] && x == e && cre[c] != e && lease[c] != e);
  x = 0;
#if PROPERTY == 0 || PROPERTY == 3
  if :: orphaned -> printf("ORPHAN: lock-%d, c%d's, holds the lock for nobody\n", e, c)
     :: else fi;
  assert(!orphaned)
#endif
}

/* ------------------------------------------------------------ the clock */
/* One tick of the store's clock: every age and elapsed time grows by one, up
 * to the largest value a rule compares it with (the age of an object that is
 * released or not the newest is only ever compared with CLEAN). */
active proctype Ticker() {
  byte i, top;
end:
  do
  :: d_step {
       printf("tick\n");
       newest(top, i);
       i = 1;
       do
       :: i <= NC ->
          if :: el[i] < ELCAP -> el[i]++ :: else fi;
          if :: ss[i] < TRUST -> ss[i]++ :: else fi;
          i++
       :: else -> break
       od;
       i = 1;
       do
       :: i <= NE ->
          if
          :: own[i] != 0 && !rel[i] && i == top && age[i] < AGECAP -> age[i]++
          :: own[i] != 0 && (rel[i] || i != top) && age[i] < CLEAN -> age[i]++
          :: else
          fi;
          i++
       :: else -> break
       od;
       i = 0; top = 0
     }
  od
}

/* ---------------------------------------------------------- the network */
/* A create may be delayed (a slow proxy, a request the SDK retried) and reach
 * the store at any later time, when its client has stopped waiting for it,
 * or never. The network holds one such create at a time. */
active proctype Network() {
  byte c, e, x, k;
  bit orphaned;
end:
  do
  :: atomic {
       stray_c != 0 ->
       c = stray_c; e = stray_e; stray_c = 0; stray_e = 0;
       if
       :: printf("network: c%d's delayed create of lock-%d lands (200, unheard)\n", c, e);
          store_create(e, c, 0);
          check_orphan(c, e, x, k)
       :: printf("network: c%d's delayed create of lock-%d is lost\n", c, e)
       fi;
       c = 0; e = 0
     }
  od
}

/* --------------------------------------------------- property (a) monitor */
#if PROPERTY == 0 || PROPERTY == 1
active proctype MutualExclusion() {
  byte trusted_leases;
end:
  atomic {
    (TRUSTED(1) + TRUSTED(2) + TRUSTED3 > 1) ->
    trusted_leases = TRUSTED(1) + TRUSTED(2) + TRUSTED3;
#if NC == 3
    printf("TWO TRUSTED LEASES: c1 lock-%d, c2 lock-%d, c3 lock-%d (0: none or untrusted)\n",
           (TRUSTED(1) -> lease[1] : 0), (TRUSTED(2) -> lease[2] : 0), (TRUSTED3 -> lease[NC] : 0));
#else
    printf("TWO TRUSTED LEASES: c1 lock-%d, c2 lock-%d\n", lease[1], lease[2]);
#endif
    assert(trusted_leases <= 1)
  }
}
#endif

/* ----------------------------------------------------------- the client */
/* Each atomic block of a client is one step: one request to the store,
 * applied atomically, with the client's decision on its answer. Between two
 * steps any other process may run and any number of ticks may pass: that is
 * how a client is slow, paused or descheduled, and how a request or its
 * answer takes long. */

/* The attempt ends without a lease: HeldError, start over, or an error after
 * abandoning. Where the client lets go, check (c); then Acquire attempts
 * again. */
inline end_attempt() {
  cre[me] = 0;
  check_orphan(me, e, x, k);
  ss[me] = TRUST; el[me] = ELCAP;
  e = 0; mask = 0; tries = 0; dl = 0;
  goto attempt
}

/* An attempt found lock-n held (HeldError): client DIRECT_CLIENT may watch
 * it (§5 "Waiting") and create n+1 directly once a poll reads it released;
 * every client may also simply attempt again later. */
inline held_error() {
  if
  :: me == DIRECT_CLIENT && n < NE ->
     cre[me] = 0;
     check_orphan(me, e, x, k);
     ss[me] = TRUST; el[me] = ELCAP;
     e = 0; mask = 0; tries = 0; dl = 0;
     wn = n; n = 0;
     goto watch
  :: n = 0; end_attempt()
  fi
}

/* §7: the epochs a LIST (made now) lets cleanup delete once the attempt
 * has acquired: each listed epoch below the newest, n, whose successor in
 * the listing was last written at least cleanupAge before the LIST's Date. */
inline cleanup_mask() {
  mask = 0; k = 1;
  do
  :: k < n ->
     if
     :: own[k] != 0 ->
        x = k + 1;
        do                             /* its successor in the listing */
        :: own[x] == 0 -> x++
        :: else -> break
        od;
#ifndef MUTANT_NO_CLEANUP_AGE
        if :: age[x] >= CLEAN -> mask = mask | (1 << k) :: else fi
#else
        mask = mask | (1 << k)         /* MUTANT: no age condition */
#endif
     :: else
     fi;
     k++
  :: else -> break
  od;
  k = 0; x = 0
}

/* The lease has ended (released, lost, or dropped); Acquire may run again. */
inline end_lease() {
  lease[me] = 0; ss[me] = TRUST;
  e = 0;
  goto attempt
}

/* Steps 5 and 6, on the create's 200 or a read-back of our nonce. */
inline established() {
  /* A direct create (§5 "The direct create"): the LIST sent with the create
   * must show lock-(e-1), the epoch the poll read released, as the newest
   * (dl is that listing's newest + 1). Anything newer means the epoch just
   * created may be a deleted one re-created: abandon it and start over. (The
   * SDK's LIST may also be answered after the create, and then it accepts the
   * create's own epoch as the newest. Every listing the SDK accepts implies
   * that no epoch above e-1 existed at `start` (one that did, or a newer one,
   * would still exist — the newest epoch is never deleted — and be listed):
   * so this LIST, made at `start`, accepts whenever the SDK's does.) */
#ifndef MUTANT_DIRECT_NO_LIST
  if
  :: dl != 0 && dl != e ->
     printf("c%d direct create: its LIST showed lock-%d newest, not lock-%d: abandon\n", me, dl - 1, e - 1);
     goto abandoning
  :: else
  fi;
#endif
  dl = 0;
  /* Step 5. More than attemptWindow since `start`, by this client's clock:
   * LIST after <name>/lock-e. A newer epoch means the one just created is
   * stale (§7): abandon it and start over. */
  if
  :: el[me] > AW ->
#ifndef MUTANT_NO_RELIST
     k = e + 1;
     do
     :: k <= NE && own[k] == 0 -> k++
     :: k <= NE && own[k] != 0 ->
        printf("c%d step 5: slow attempt; LIST after lock-%d finds lock-%d: stale, abandon\n", me, e, k);
        k = 0; goto abandoning
     :: k > NE ->
        printf("c%d step 5: slow attempt; LIST after lock-%d finds nothing newer\n", me, e);
        k = 0; break
     od
#else
     printf("c%d step 5: slow attempt, but MUTANT: no LIST\n", me)
#endif
  :: else
  fi;
  /* Step 6. Trusted until sent + V - margin, by this client's clock; if
   * that has passed already, the store answered too late: abandon. */
  if
  :: ss[me] < TRUST ->
     printf("c%d step 6: ACQUIRED lock-%d, trusted for %d more ticks\n", me, e, TRUST - ss[me]);
     lease[me] = e; cre[me] = 0; el[me] = ELCAP; tries = 0;
#if PROPERTY == 0 || PROPERTY == 2
     if :: e <= last_acquired -> printf("EPOCH REUSED: lock-%d acquired after lock-%d\n", e, last_acquired)
        :: else fi;
     assert(e > last_acquired);          /* property (b) */
#endif
     last_acquired = e;
     /* §7 history cleanup (in the background): DeleteObjects of the keys
      * step 2's LIST found deletable. It deletes whatever is there now.
      * The model applies it with the acquisition; applied later, or never
      * (it failed: nothing but a longer listing), it could only delete
      * later than here, which widens the margin §7 relies on. */
     k = 1;
     do
     :: k < e ->
        if
        :: mask & (1 << k) ->
           printf("c%d cleanup: DeleteObjects lock-%d\n", me, k);
           own[k] = 0; rel[k] = 0; age[k] = 0
        :: else
        fi;
        k++
     :: else -> break
     od;
     k = 0; mask = 0;
     goto held
  :: else ->
     printf("c%d step 6: answered after its trust deadline: abandon\n", me);
     goto abandoning
  fi
}

/* Step 4: PUT <name>/lock-e If-None-Match: *, and what the client hears. */
inline put_create() {
  if
  :: own[e] == 0 ->
     printf("c%d step 4: PUT lock-%d If-None-Match:* -> 200\n", me, e);
     store_create(e, me, 0);
     established()
  :: own[e] == 0 ->
     printf("c%d step 4: PUT lock-%d If-None-Match:* -> applied, answer lost\n", me, e);
     store_create(e, me, 0)
  :: own[e] == 0 && stray_c == 0 ->
     printf("c%d step 4: PUT lock-%d If-None-Match:* -> delayed in the network\n", me, e);
     stray_c = me; stray_e = e
  :: own[e] == 0 && stray_c != 0 ->
     printf("c%d step 4: PUT lock-%d If-None-Match:* -> lost on the way\n", me, e)
  :: own[e] != 0 ->                      /* another client's create, or the
                                            SDK's retry of our own */
     printf("c%d step 4: PUT lock-%d If-None-Match:* -> 412\n", me, e)
  fi;
  /* The outcome is unknown. */
#ifdef MUTANT_NO_READBACK
  printf("c%d MUTANT: takes the unknown outcome for \"someone else has it\"\n", me);
  end_attempt()
#else
  goto readback
#endif
}

proctype Client(byte me) {
  byte n, e, mask, k, x, tries;
  bit orphaned;
  byte wn;   /* the held epoch DIRECT_CLIENT watches (0: none)              */
  byte dl;   /* a direct create's LIST: the newest epoch it showed + 1 (0:
                not a direct create)                                        */

  /* ================ §5 Acquire attempt (TryAcquire; Acquire repeats it) == */
attempt:
  atomic {
    /* Step 1. Note the client time `start`: el counts from here. */
    el[me] = 0;
    /* Step 2. LIST <name>/lock- -> the newest epoch n. The same page is what
     * §7 cleanup decides on: each listed epoch but the newest (history = 1)
     * whose successor in the listing was last written at least cleanupAge
     * before the LIST's Date goes into mask, for deletion once this attempt
     * has acquired. (The model sends the LIST at `start`: sent later, it
     * would only shorten what step 5 measures after it.) */
    newest(n, k);
    cleanup_mask();
    if
    :: n == 0 ->                         /* none: go to 4 with e = 1 */
       printf("c%d steps 1-2: LIST: no epoch\n", me);
       e = 1
    :: else ->
       /* Step 3. GET <name>/lock-n: is it released, or lapsed by the
        * store's clock (Date - Last-Modified >= V + serverSlack, §6)? The
        * model sends the GET with the LIST. (Had the lock changed between
        * them, the same attempt exists here with its LIST at the GET's
        * moment: the same decision, and step 5 then measures less.) */
       if
       :: rel[n] ->
          printf("c%d steps 1-3: LIST: newest lock-%d; GET: released\n", me, n)
       :: !rel[n] && age[n] >= LAPSE ->
          printf("c%d steps 1-3: LIST: newest lock-%d; GET: lapsed\n", me, n)
       :: else ->
#ifndef MUTANT_NO_LAPSE_CHECK
          /* HeldError. Acquire waits and attempts again: the waiter's
           * polling is abstracted to attempting again at any later time. */
          printf("c%d steps 1-3: LIST: newest lock-%d; GET: held (HeldError)\n", me, n);
          held_error()
#else
          printf("c%d steps 1-3: LIST: newest lock-%d; MUTANT: no GET\n", me, n)
#endif
       fi;
       if
       :: n == NE -> goto exhausted      /* ErrEpochExhausted */
       :: else -> e = n + 1; n = 0
       fi
    fi
  };

  goto create;

  /* Waiting (§5): a conditional GET of lock-wn every poll interval. A poll
   * that reads it unchanged or renewed changes nothing (the next one is the
   * same step, later); one that reads it released goes on to the direct
   * create; a poll that finds it gone, or the waiter's wake-up at its
   * lapse, makes a normal attempt. */
watch:
  if
  :: atomic { rel[wn] -> printf("c%d poll: GET lock-%d: released\n", me, wn) }
  :: atomic { printf("c%d stops watching lock-%d: attempt\n", me, wn); wn = 0; goto attempt }
  fi;
  /* The direct create: steps 4-6 at once, without step 2's LIST first.
   * `start` is when the create and a LIST of the lock are sent (together;
   * the model applies the LIST first: answered after the create, it shows
   * more). Step 3 was the poll. The LIST's page is cleanup's (§7). */
  atomic {
    el[me] = 0;
    newest(n, k);
    printf("c%d direct create of lock-%d; its LIST: newest lock-%d\n", me, wn + 1, n);
    dl = n + 1;
    cleanup_mask();
    e = wn + 1; wn = 0; n = 0
  };

  /* Step 4. PUT <name>/lock-e If-None-Match: * with a fresh nonce. The
   * lease's validity counts from just before it is first sent (ss). */
create:
  atomic { ss[me] = 0; cre[me] = e; tries = 0; put_create() };
resend:                                  /* the same body again */
  atomic { put_create() };

  /* Unknown outcome: read the key back (with a context that survives the
   * caller's cancellation) and compare the nonce. */
readback:
  atomic {
    if
    :: own[e] == me && !rel[e] ->        /* our nonce: as if 200 */
       printf("c%d step 4: read back lock-%d: our nonce\n", me, e);
       established()
    :: own[e] != 0 && own[e] != me ->    /* another nonce: HeldError (or
                                            start over if it is released) */
       printf("c%d step 4: read back lock-%d: c%d's nonce\n", me, e, own[e]);
       end_attempt()
    :: own[e] == me && rel[e] ->         /* ours, released: start over (only
                                            ForceRelease does that) */
       end_attempt()
    :: own[e] == 0 && tries < MAXTRY ->  /* absent: ours did not land (yet): */
       printf("c%d step 4: read back lock-%d: absent; send it again\n", me, e);
       tries++; goto resend              /* send the same body again */
    :: printf("c%d step 4: read back lock-%d fails too, or the caller gives up\n", me, e);
       goto abandoning                   /* still unknown */
    fi
  };

  /* Abandon (acquire.go abandon): give up epoch e, which this client may
   * have created, so that it does not hold the lock for nobody: create the
   * key as released (a late copy of our create then gets 412); if the key
   * exists, read it and, if it is our own unreleased object, mark it
   * released with If-Match. Abandon's requests are answered: guarantee 3's
   * exception, a store that cannot be reached at all while the client gives
   * up, is not modelled. */
abandoning:
  atomic {                               /* PUT If-None-Match: *, expired */
#ifndef MUTANT_ABANDON_NO_CREATE
    if
    :: own[e] == 0 ->
       printf("c%d abandon: PUT lock-%d If-None-Match:* expired -> 200\n", me, e);
       store_create(e, me, 1); end_attempt()
    :: else                              /* 412: the key exists */
    fi
#else
    printf("c%d abandon: MUTANT: no create as released\n", me)
#endif
  };
  atomic {
    /* GET, then PUT If-Match: <etag read>, expired. (One step: between the
     * two only cleanup could change the object, by deleting it, and then the
     * PUT gets 412 and abandon starts again with the create.) */
    if
    :: own[e] == 0 ->
#ifndef MUTANT_ABANDON_NO_CREATE
       goto abandoning                   /* deleted meanwhile: again */
#else
       printf("c%d abandon: GET lock-%d: absent, nothing to release\n", me, e);
       end_attempt()
#endif
    :: own[e] != 0 && (own[e] != me || rel[e]) ->   /* not ours, or released */
       printf("c%d abandon: GET lock-%d: not ours to release\n", me, e);
       end_attempt()
    :: own[e] == me && !rel[e] ->
       printf("c%d abandon: GET lock-%d: ours; PUT If-Match expired -> 200\n", me, e);
       rel[e] = 1; age[e] = 0; end_attempt()
    fi
  };

  /* ============================================ holding the lease (§5) == */
held:
  do
  :: atomic {
       /* Renew, while trusted: PUT If-Match: <etag held>, renewals + 1. It
        * counts only if its answer arrives before the trust deadline; then
        * the trust counts from this send. The model answers it at once (its
        * send, its application and its answer at one instant: the
        * application as early, and so the object as old, as it can be). A
        * renewal that does not land changes nothing; one that lands without
        * the holder ever learning it is, for every client, a confirmed
        * renewal whose holder then stops using the lease early (below). */
       ss[me] < TRUST && own[e] == me && !rel[e] ->
       printf("c%d renew lock-%d -> 200\n", me, e);
       age[e] = 0; ss[me] = 0
     }
  :: atomic {
       /* Release: PUT If-Match: <etag held>, expired: true. The caller stops
        * relying on the lease when it calls Release. Past the trust deadline
        * Release writes nothing; one that does not land before it is the
        * same as no release (next branch). */
       if
       :: ss[me] < TRUST && own[e] == me && !rel[e] ->
          printf("c%d release lock-%d -> 200\n", me, e);
          rel[e] = 1; age[e] = 0
       :: else ->
          printf("c%d release lock-%d: past its deadline, writes nothing\n", me, e)
       fi;
       end_lease()
     }
  :: atomic {
       /* The holder crashes, detaches, or stops using the lease without a
        * release, or its trust deadline's timer ends it: nothing is
        * written; the object lapses. */
       printf("c%d stops using lock-%d without a release\n", me, e);
       end_lease()
     }
  :: /* PAUSE across the lease's expiry (GC, SIGSTOP, a suspended host): the
      * holder is descheduled until its trust deadline has passed, then
      * carries on in this loop as if nothing had happened; a Renew or a
      * Release it tries now writes nothing (§10 "holder pauses"). Any
      * client may pause at any step for any number of ticks anyway; this
      * branch only spells the case out. */
     !(ss[me] < TRUST) -> skip
  od;

exhausted:                               /* ErrEpochExhausted: the client stops */
  atomic {
    printf("c%d: epochs exhausted\n", me);
    el[me] = ELCAP; mask = 0; e = 0; n = 0
  }
}

init {
  byte i;
  atomic {
    i = 1;
    do
    :: i <= NC -> ss[i] = TRUST; el[i] = ELCAP; i++
    :: else -> break
    od;
    i = 0;
    run Client(1); run Client(2);
#if NC == 3
    run Client(3)
#endif
  }
}
