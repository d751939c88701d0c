/*
 * shared.pml: a Spin model of shared and exclusive leases, a design that is
 * not yet in the SDK (s3lock/SHARED-DESIGN.md; section numbers § are
 * PROTOCOL.md's, "D§" SHARED-DESIGN.md's).
 *
 * One lock; NR readers (shared acquirers, ids 1..NR) and one writer (an
 * exclusive acquirer, id W); a store that applies each request atomically
 * (A1, A2); a ticker that advances the store's clock. The lock's epoch
 * objects are created in order with If-None-Match (one winner per key). An
 * epoch is a *shared epoch* (no holder, never renewed, never released,
 * never lapses: its holders are its shares) or an *exclusive* one (a lease,
 * §5, that may carry the mark `pending`: written over shares that may still
 * be held, until its writer has seen them end). A *share* is a lease of its
 * own under a shared epoch (key <name>/lock-shared/<S>/<id>.json), created
 * If-None-Match, renewed If-Match, released, lapsing by the store's clock
 * exactly as an epoch's lease does (§6).
 *
 * Checked, exhaustively:
 *   (x) exclusion: never an exclusive holder that trusts its lease while
 *       anyone else (a reader that trusts its share) trusts one.
 *       Process Exclusion: assert(overlap == 0).
 *   (y) no starvation by new readers: once a writer's pending epoch exists
 *       (not released), no reader *starts* to trust a share under an epoch
 *       below it: the writer waits only for shares that were there before
 *       it came. At a reader's trust step: assert(passed == 0).
 *
 * Mutants (spin -a -DMUTANT_X), each one rule removed; check.sh requires a
 * counterexample to the property named, checked alone (-DPROPERTY=1: (x),
 * 2: (y)):
 *   MUTANT_NO_RECHECK       the reader trusts its share as soon as it knows
 *                           it landed, without the LIST for an epoch above
 *                           its shared epoch (D§4 step 5)          -> (x), (y)
 *   MUTANT_CHECK_BESIDE_CREATE  the reader sends that LIST beside its share's
 *                           create (as §5's direct create does with its
 *                           LIST): the LIST may be applied first, and the
 *                           write-then-read order the rule rests on is
 *                           lost                                      -> (x)
 *   MUTANT_NO_SHARE_WAIT    the writer trusts its epoch over a shared one at
 *                           once, without waiting for the shares  -> (x)
 *   MUTANT_EARLY_SHARE_LAPSE  the writer judges a share lapsed without
 *                           serverSlack (at Date - Last-Modified >= V) -> (x)
 *   MUTANT_READERS_PASS_PENDING  a reader that finds a pending exclusive
 *                           epoch newest joins the shared epoch below it,
 *                           and its LIST check does not count pending
 *                           epochs (the writer's epoch "not marked pending"
 *                           for readers)                              -> (y)
 * and the two holes of the starting design (D§13), as mutants:
 *   MUTANT_FREE_AS_TODAY    a writer that finds an exclusive epoch ended
 *                           (released or lapsed) takes the next one as
 *                           today, without looking at shares, even when
 *                           that epoch ended while still pending (its
 *                           writer gave up or crashed before the shares
 *                           below it ended)                           -> (x)
 *   MUTANT_SHARES_OF_N_ONLY a writer over a shared epoch N waits only for
 *                           N's shares (D§13's "LIST N's shares"), not for
 *                           every share still listed: shares of an older
 *                           shared epoch, below a writer that gave up, are
 *                           missed (with -DNE=4: shared, pending given up,
 *                           shared, the writer again)                -> (x)
 *   MUTANT_MARK_EARLY       a renewal of a pending epoch drops the mark
 *                           before the wait ended; the writer gives up, and
 *                           the next writer takes the released epoch for a
 *                           cleared one                               -> (x)
 *   MUTANT_DELETE_LIVE_SHARES  cleanup deletes the shares of the epochs below
 *                           the one its acquisition created, whether or not
 *                           they ended: a writer's LIST then misses a share
 *                           that is still trusted                     -> (x)
 * and the boundary run -DMARGIN=0 (a reader trusts its share a tick too
 * long): (x).
 *
 * Abstracted (README.md lists it all): the epoch mechanics that s3lock.pml
 * checks (the creates of epochs are answered, no read-back, no abandon,
 * no step 5, no history cleanup); the line (§13, line.pml); more than one
 * writer (-DNW=2 adds a second, slower to check); a share's create that lands
 * late (after its reader gave up: a share nobody trusts, which only makes a
 * writer wait until it lapses). Modelled: a share's create whose answer is
 * lost (read back by its id), any pause between two steps, readers and the
 * writer that stop renewing (crash, a deadline passed) or give up.
 *
 * Time is s3lock.pml's: ticks of the store's clock; age[] and sh_age[] are
 * Date - Last-Modified, read with the worst resolution error RES, so an
 * object may be judged lapsed at true age LAPSE = V + SLACK - RES; a holder
 * (of a lease or a share) trusts for TRUST = V - MARGIN + DRIFT ticks after
 * it sent the write its trust counts from. LAPSE >= TRUST is §6's argument.
 */

#ifndef NR
#define NR 2            /* readers, ids 1..NR */
#endif
#ifndef NW
#define NW 1            /* writers, ids NR+1..NR+NW */
#endif
#define NC (NR + NW)
#ifndef NE
#define NE 4            /* epochs 1..NE */
#endif
#ifndef PROPERTY
#define PROPERTY 0      /* 0: (x) and (y); 1: (x) only; 2: (y) only */
#endif

#ifndef V
#define V 2
#endif
#ifndef MARGIN
#define MARGIN 1
#endif
#ifndef DRIFT
#define DRIFT 1
#endif
#ifndef SLACK
#define SLACK 1
#endif
#ifndef RES
#define RES 1
#endif
#define LAPSE (V + SLACK - RES)     /* true age at which an object may be judged lapsed */
#define TRUST (V - MARGIN + DRIFT)  /* ticks after `sent` that a holder trusts */
#ifdef MUTANT_EARLY_SHARE_LAPSE
#define SHARE_LAPSE (V - RES)       /* MUTANT: no serverSlack in the writer's judgment */
#else
#define SHARE_LAPSE LAPSE
#endif

#define SH 1  /* a shared epoch */
#define EX 2  /* an exclusive epoch (a lease) */

/* ------------------------------------------------------------ the store */
byte kind[NE + 1];   /* 0: absent; SH or EX                                   */
bit  rel[NE + 1];    /* an exclusive epoch released (`expired`)               */
bit  pend[NE + 1];   /* an exclusive epoch's mark `pending` (D§3)             */
byte age[NE + 1];    /* Date - Last-Modified of the newest exclusive epoch    */
byte eown[NE + 1];   /* an exclusive epoch's writer (its nonce)               */
/* The shares: reader r's current share object (one at a time; a reader
 * starts again only once its last share has ended, below). */
byte sh_e[NR + 1];   /* the shared epoch it is under; 0: no share object      */
byte sh_age[NR + 1]; /* Date - Last-Modified                                  */
bit  sh_id[NR + 1];  /* which of the reader's shares it is (its key's id: a
                        new share has a new key; one bit tells two in a row
                        apart)                                                */
/* A share is released by deleting it (D§4 step 6); a writer judges an
 * absent share ended. */

/* ---------------------------------------------------------- the clients */
bit  rtrust[NR + 1]; /* reader r trusts its share (the check passed)          */
byte ss[NC + 1];     /* ticks since client c sent the write its trust counts from */
byte wl[NC + 1];     /* a writer's epoch (0: none)                            */
bit  wcl[NC + 1];    /* the writer has seen every share it waits for end: it
                        trusts its lease as exclusive                         */

#define R_TRUSTED(r) (rtrust[r] && ss[r] < TRUST)
#define W_TRUSTED(w) (wl[w] != 0 && wcl[w] && ss[w] < TRUST)

/* LIST <name>/lock-: the newest epoch (0: none). */
inline newest(x, k) {
  k = NE;
  do
  :: k > 0 && kind[k] == 0 -> k--
  :: else -> break
  od;
  x = k;
  k = 0
}

/* ------------------------------------------------------------ the clock */
active proctype Ticker() {
  byte i, top;
end:
  do
  :: d_step {
       printf("tick\n");
       newest(top, i);
       i = 1;
       do
       :: i <= NC -> if :: ss[i] < TRUST -> ss[i]++ :: else fi; i++
       :: else -> break
       od;
       /* Only the newest epoch's age is ever judged. */
       if
       :: top > 0 && kind[top] == EX && !rel[top] && age[top] < LAPSE -> age[top]++
       :: else
       fi;
       i = 1;
       do
       :: i <= NR -> if :: sh_e[i] != 0 && sh_age[i] < LAPSE -> sh_age[i]++ :: else fi; i++
       :: else -> break
       od;
       i = 0; top = 0
     }
  od
}

/* ----------------------------------------------------- property (x) */
#if PROPERTY == 0 || PROPERTY == 1
active proctype Exclusion() {
  byte overlap;
end:
  atomic {
    ((W_TRUSTED(NR + 1) && (R_TRUSTED(1) || R_TRUSTED(2)
#if NR > 2
      || R_TRUSTED(3)
#endif
#if NW > 1
      || W_TRUSTED(NR + 2)
#endif
    ))
#if NW > 1
    || (W_TRUSTED(NR + 2) && (R_TRUSTED(1) || R_TRUSTED(2)
#if NR > 2
      || R_TRUSTED(3)
#endif
    ))
#endif
    ) ->
    overlap = 1;
    printf("OVERLAP: an exclusive holder trusts while another holder does (readers r1 %d, r2 %d; writer w%d lock-%d)\n",
           R_TRUSTED(1), R_TRUSTED(2), NR + 1, wl[NR + 1]);
    assert(overlap == 0)
  }
}
#endif

/* ---------------------------------------------------------- a reader */
/* D§4, shared acquire. Each atomic block is one request and the reader's
 * decision on its answer; any number of ticks and other steps may come
 * between two blocks (a pause). */
proctype Reader(byte me) {
  byte n, s, x, k;
  bit above, passed;

attempt:
  atomic {
    /* Steps 1-2: LIST -> newest n; GET it. */
    newest(n, k);
    if
    :: n == 0 ->
       printf("r%d LIST: no epoch: create lock-1 shared\n", me);
       s = 1; n = 0; goto mkshared
    :: n > 0 && kind[n] == SH ->
       printf("r%d LIST: newest lock-%d, shared: join it\n", me, n);
       s = n; n = 0; goto share
    :: n > 0 && kind[n] == EX && (rel[n] || age[n] >= LAPSE) && n < NE ->
       printf("r%d LIST: newest lock-%d, exclusive, ended: create lock-%d shared\n", me, n, n + 1);
       s = n + 1; n = 0; goto mkshared
    :: n > 0 && kind[n] == EX && (rel[n] || age[n] >= LAPSE) && n >= NE ->
       n = 0; goto exhausted
    :: n > 0 && kind[n] == EX && !rel[n] && age[n] < LAPSE ->
#ifdef MUTANT_READERS_PASS_PENDING
       if
       :: pend[n] && n > 1 && kind[n - 1] == SH ->
          printf("r%d LIST: newest lock-%d, pending; MUTANT: joins lock-%d below it\n", me, n, n - 1);
          s = n - 1; n = 0; goto share
       :: else
       fi;
#endif
       printf("r%d LIST: newest lock-%d, exclusive, live: wait\n", me, n);
       n = 0; goto waitheld
    fi
  };

waitheld:
  /* A HeldError: the reader waits (polls) and attempts again later. */
  goto attempt;

mkshared:
  /* Step 3: PUT lock-s If-None-Match: * as a shared epoch (no holder, never
   * renewed). 412: someone else created lock-s: attempt again. */
  atomic {
    if
    :: kind[s] == 0 ->
       kind[s] = SH; rel[s] = 0; pend[s] = 0; age[s] = 0;
       if :: s > 1 -> age[s - 1] = 0 :: else fi;
       printf("r%d PUT lock-%d If-None-Match:* shared -> 200\n", me, s);
#ifdef MUTANT_DELETE_LIVE_SHARES
       /* MUTANT: this acquisition's cleanup (§7) deletes the shares of the
        * epochs below the one it created, ended or not. */
       x = 1;
       do
       :: x <= NR ->
          if
          :: sh_e[x] != 0 && sh_e[x] < s ->
             printf("r%d cleanup: MUTANT: DeleteObjects r%d's share of lock-%d (live)\n", me, x, sh_e[x]);
             sh_e[x] = 0; sh_age[x] = 0
          :: else
          fi;
          x++
       :: else -> break
       od;
       x = 0;
#endif
       skip
    :: else ->
       printf("r%d PUT lock-%d If-None-Match:* -> 412\n", me, s);
       s = 0; goto attempt
    fi
  };

share:
#ifdef MUTANT_CHECK_BESIDE_CREATE
  /* MUTANT: step 5's LIST goes out with the create, and the store applies it
   * first (the create may take longer on its way). */
  atomic {
    newest(x, k); above = (x > s); x = 0;
    printf("r%d MUTANT: LIST after lock-%d sent with the create: newer epoch %d\n", me, s, above)
  };
#endif
  /* Step 4: PUT <name>/lock-shared/<s>/<id> If-None-Match: * (a new id), its
   * trust counted from this send. The store applies it, and the reader hears
   * 200 or nothing (a lost answer, a timeout): then it reads the key back. */
  atomic {
    ss[me] = 0;
    if
    :: sh_e[me] = s; sh_age[me] = 0; sh_id[me] = !sh_id[me];
       printf("r%d PUT share of lock-%d If-None-Match:* -> 200\n", me, s);
       goto check
    :: sh_e[me] = s; sh_age[me] = 0; sh_id[me] = !sh_id[me];
       printf("r%d PUT share of lock-%d If-None-Match:* -> applied, answer lost\n", me, s)
    :: printf("r%d PUT share of lock-%d If-None-Match:* -> lost on the way\n", me, s)
    fi
  };
  /* Read back the share's key: ours (its id) -> as if 200; absent -> it did
   * not land: give up (abandon creates the key as released: nothing lands
   * later) and attempt again. */
  atomic {
    if
    :: sh_e[me] != 0 ->
       printf("r%d read back the share: ours\n", me)
    :: else ->
       printf("r%d read back the share: absent; abandon, attempt again\n", me);
       ss[me] = TRUST; s = 0; goto attempt
    fi
  };

check:
  /* Step 5: LIST <name>/lock- after lock-s: an epoch above s means a writer
   * (or anyone) got in: withdraw (release the share) and wait. None: the
   * share is trusted until sent + V - margin. */
  atomic {
#ifndef MUTANT_CHECK_BESIDE_CREATE
    newest(x, k);
    above = (x > s);
#ifdef MUTANT_READERS_PASS_PENDING
    /* MUTANT: a pending exclusive epoch does not count. */
    if :: above && x == s + 1 && kind[x] == EX && pend[x] && !rel[x] -> above = 0 :: else fi;
#endif
    x = 0;
#endif
#ifdef MUTANT_NO_RECHECK
    above = 0;
#endif
    if
    :: above ->
       printf("r%d LIST after lock-%d: a newer epoch: withdraw (DELETE the share)\n", me, s);
       sh_e[me] = 0; sh_age[me] = 0; ss[me] = TRUST; above = 0; s = 0;
       goto attempt
    :: !above && ss[me] >= TRUST ->
       printf("r%d LIST after lock-%d: nothing newer, but past its deadline: DELETE the share\n", me, s);
       sh_e[me] = 0; sh_age[me] = 0; s = 0;
       goto attempt
    :: !above && ss[me] < TRUST ->
       /* Property (y): no pending exclusive epoch (not released) above s. */
       passed = 0;
       k = s + 1;
       do
       :: k <= NE -> if :: kind[k] == EX && pend[k] && !rel[k] -> passed = 1 :: else fi; k++
       :: else -> break
       od;
       k = 0;
       printf("r%d LIST after lock-%d: nothing newer: SHARED lease, trusted for %d more ticks\n", me, s, TRUST - ss[me]);
#if PROPERTY == 0 || PROPERTY == 2
       if :: passed -> printf("PASSED: r%d starts to trust a share of lock-%d below a pending exclusive epoch\n", me, s)
          :: else fi;
       assert(passed == 0);
#endif
       rtrust[me] = 1
    fi
  };

  /* Holding the share: renew, release, or stop renewing (a crash, its
   * deadline's timer, a pause past it). */
  do
  :: atomic {
       ss[me] < TRUST && sh_e[me] != 0 ->
       printf("r%d renew its share of lock-%d -> 200\n", me, s);
       ss[me] = 0; sh_age[me] = 0
     }
  :: atomic {
       if
       :: ss[me] < TRUST ->
          printf("r%d release: DELETE its share of lock-%d -> 204\n", me, s);
          sh_e[me] = 0; sh_age[me] = 0
       :: else ->
          printf("r%d release its share of lock-%d: past its deadline, writes nothing\n", me, s)
       fi;
       rtrust[me] = 0; ss[me] = TRUST;
       break
     }
  :: atomic {
       printf("r%d stops using its share of lock-%d without a release\n", me, s);
       rtrust[me] = 0; ss[me] = TRUST;
       break
     }
  od;
  /* The reader (or the process that replaces it) acquires again once its
   * last share has ended: released, or old enough that anyone may judge it
   * lapsed (it is then as good as gone to every judgment; dropping it here
   * is the earliest such judgment). */
  atomic {
    (sh_e[me] == 0 || sh_age[me] >= LAPSE) ->
    sh_e[me] = 0; sh_age[me] = 0; s = 0;
    goto attempt
  };

exhausted:
  skip
}

/* ----------------------------------------------------------- a writer */
/* D§5, exclusive acquire. */
proctype Writer(byte me) {
  byte n, e, x, k, r;
  bit wait;            /* the epoch is created pending: shares may be held   */
  byte ws;             /* the wait set: bit r = reader r's share, as listed  */
  byte wid;            /* bit r = that share's id                            */

attempt:
  atomic {
    newest(n, k);
    if
    :: n == 0 ->
       printf("w%d LIST: no epoch: create lock-1\n", me);
       e = 1; wait = 0
    :: n > 0 && kind[n] == EX && !rel[n] && age[n] < LAPSE ->
       printf("w%d LIST: newest lock-%d, exclusive, live: wait\n", me, n);
       n = 0; goto waitheld
    :: n > 0 && kind[n] == EX && (rel[n] || age[n] >= LAPSE) ->
#ifdef MUTANT_FREE_AS_TODAY
       wait = 0;
#else
       wait = pend[n];         /* ended while pending: shares may be held */
#endif
       printf("w%d LIST: newest lock-%d, exclusive, ended (pending %d): create lock-%d\n", me, n, pend[n], n + 1);
       e = n + 1
    :: n > 0 && kind[n] == SH ->
       printf("w%d LIST: newest lock-%d, shared: create lock-%d pending\n", me, n, n + 1);
       e = n + 1; wait = 1
    fi;
    if
    :: e > NE -> goto exhausted
    :: else
    fi;
    n = 0
  };

  /* PUT lock-e If-None-Match: * (exclusive; `pending` if wait), its trust
   * counted from this send. */
  atomic {
    if
    :: kind[e] == 0 ->
       kind[e] = EX; rel[e] = 0; pend[e] = wait; age[e] = 0; eown[e] = me;
       if :: e > 1 -> age[e - 1] = 0 :: else fi;
       ss[me] = 0; wl[me] = e;
       printf("w%d PUT lock-%d If-None-Match:* (pending %d) -> 200\n", me, e, wait);
       if
       :: !wait ->
          printf("w%d EXCLUSIVE lease lock-%d\n", me, e);
          wcl[me] = 1; goto held
       :: else
       fi
    :: else ->
       printf("w%d PUT lock-%d If-None-Match:* -> 412\n", me, e);
       e = 0; wait = 0; goto attempt
    fi
  };

  /* LIST <name>/lock-shared/ (every epoch's shares): the wait set is every
   * share listed that is not judged ended (released, or lapsed by the
   * store's clock: Date - LastModified >= V + serverSlack). */
  atomic {
    ws = 0; wid = 0; r = 1;
    do
    :: r <= NR ->
       if
#ifdef MUTANT_SHARES_OF_N_ONLY
       /* MUTANT: over a shared epoch, only that epoch's shares. */
       :: sh_e[r] != 0 && (kind[e - 1] == SH -> sh_e[r] == e - 1 : sh_e[r] < e) && sh_age[r] < SHARE_LAPSE ->
#else
       :: sh_e[r] != 0 && sh_e[r] < e && sh_age[r] < SHARE_LAPSE ->
#endif
          ws = ws | (1 << r);
          if :: sh_id[r] -> wid = wid | (1 << r) :: else fi
       :: else
       fi;
       r++
    :: else -> break
    od;
    r = 0;
#ifdef MUTANT_NO_SHARE_WAIT
    ws = 0;
#endif
    printf("w%d LIST shares: waits for %d (bit r: reader r)\n", me, ws)
  };

  /* Waiting for the shares: a LIST of them each poll (only those of the
   * wait set are judged: a share created after this writer's epoch is
   * withdrawn by its reader), renewals of the pending lease, giving up. */
  do
  :: atomic {
       r = 1;
       do
       :: r <= NR ->
          if
          :: (ws & (1 << r)) &&
             (sh_e[r] == 0 || sh_id[r] != ((wid >> r) & 1) || sh_age[r] >= SHARE_LAPSE) ->
             ws = ws & ~(1 << r); wid = wid & ~(1 << r)
          :: else
          fi;
          r++
       :: else -> break
       od;
       r = 0;
       if
       :: ws == 0 && ss[me] < TRUST ->
          printf("w%d LIST shares: every share it waited for ended: EXCLUSIVE lease lock-%d\n", me, e);
          wcl[me] = 1; break
       :: ws == 0 && ss[me] >= TRUST ->
          printf("w%d LIST shares: all ended, but past its deadline: give up lock-%d\n", me, e);
          wl[me] = 0; ss[me] = TRUST; e = 0; wait = 0; goto attempt
       :: ws != 0 ->
          printf("w%d LIST shares: still waits for %d\n", me, ws)
       fi
     }
  :: atomic {
       ss[me] < TRUST && !rel[e] && eown[e] == me ->
       printf("w%d renew lock-%d (pending) -> 200\n", me, e);
       ss[me] = 0; age[e] = 0;
#ifdef MUTANT_MARK_EARLY
       pend[e] = 0;   /* MUTANT: the renewal drops the mark before the wait ended */
#endif
       skip
     }
  :: atomic {
       /* Gives up (its wait ended): releases the pending epoch, which stays
        * marked pending; or crashes: it lapses, still pending. */
       if
       :: ss[me] < TRUST -> rel[e] = 1; age[e] = 0;
          printf("w%d gives up: release lock-%d (still pending)\n", me, e)
       :: printf("w%d stops waiting without a release: lock-%d lapses, still pending\n", me, e)
       fi;
       wl[me] = 0; ss[me] = TRUST; e = 0; wait = 0; ws = 0; wid = 0;
       goto attempt
     }
  od;

held:
  /* Holding the exclusive lease. The first write after the wait (a renewal
   * or the release) clears the mark `pending`. */
  do
  :: atomic {
       ss[me] < TRUST && !rel[e] ->
       printf("w%d renew lock-%d -> 200 (pending 0)\n", me, e);
       ss[me] = 0; age[e] = 0; pend[e] = 0
     }
  :: atomic {
       if
       :: ss[me] < TRUST -> rel[e] = 1; pend[e] = 0; age[e] = 0;
          printf("w%d release lock-%d -> 200\n", me, e)
       :: else -> printf("w%d release lock-%d: past its deadline, writes nothing\n", me, e)
       fi;
       wl[me] = 0; wcl[me] = 0; ss[me] = TRUST; e = 0; wait = 0;
       goto attempt
     }
  :: atomic {
       printf("w%d stops using lock-%d without a release\n", me, e);
       wl[me] = 0; wcl[me] = 0; ss[me] = TRUST; e = 0; wait = 0;
       goto attempt
     }
  od;

waitheld:
  goto attempt;

exhausted:
  skip
}

init {
  byte i;
  atomic {
    i = 1;
    do
    :: i <= NC -> ss[i] = TRUST; i++
    :: else -> break
    od;
    i = 1;
    do
    :: i <= NR -> run Reader(i); i++
    :: else -> break
    od;
    do
    :: i <= NC -> run Writer(i); i++
    :: else -> break
    od;
    i = 0
  }
}
