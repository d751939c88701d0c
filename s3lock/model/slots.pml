/*
 * slots.pml: a Spin model of slot locks (s3lock/PROTOCOL.md §14).
 *
 * One lock name; one acquirer of it as a mutex and three slot acquirers
 * (Slots(2) once, Slots(3) twice) that each take a slot twice. The lock's
 * own epoch objects are modelled as §5 writes them: created in order, each
 * with If-None-Match (so epoch e+1 can be created only while e is the
 * newest: one winner per race), read with a LIST and a GET that may be
 * stale by the time the reader acts on them (any interleaving). An epoch is
 * a mutex's lease or a marker that records n. A mutex's lease is "over" once
 * its holder released it (its lapse is s3lock.pml's business: a lease is
 * judged lapsed only after its holder stopped trusting it). Each slot is an
 * atomic test-and-set: it is a mutex of its own, whose guarantees are
 * s3lock.pml's. Section numbers (§) are PROTOCOL.md's; README.md in this
 * directory maps the model to the protocol.
 *
 * Checked, as assertions at every acquisition (the only steps that add a
 * holder), exhaustively:
 *   (s1) a mutex's holder and a slot's holder never hold at once:
 *        assert(mixed == 0);
 *   (s2) no slot holder holds while more holders hold than its own n
 *        admits (so never more than the smallest n of the holders):
 *        assert(overfull == 0).
 *
 * Mutants (spin -a -DMUTANT_X), each one mechanism of §14 removed; check.sh
 * requires a counterexample to the property named, checked alone
 * (-DPROPERTY=1 for s1, 2 for s2):
 *   MUTANT_MARKER_LAPSES  a mutex acquirer takes a marker for a lease that
 *                         has lapsed (a marker's validity is 0) and creates
 *                         the next epoch: (s1)
 *   MUTANT_NO_MARKER      a slot acquirer that finds the lock free takes a
 *                         slot without writing the marker first: (s1)
 *   MUTANT_NO_N_CHECK     a slot acquirer takes a slot of a marker that
 *                         records another n, among its own n slots: (s2)
 *   MUTANT_ABANDON_MARKER the marker's writer, unsure its create landed in
 *                         time, abandons it as it would a lease: releases
 *                         it, although others may hold slots under it (§14
 *                         "never released by its writer"): (s1)
 * Left out: ForceRelease of the marker (an operator's override, documented
 * as such), the line (FIFO: it changes who attempts, never what attempting
 * does, line.pml), read-back of ambiguous creates (s3lock.pml: a marker is
 * created by the same createObject as a lease; abandon, which differs for
 * a marker, is the mutant above), history
 * cleanup and step 5's second LIST (s3lock.pml; the marker's create makes
 * the same check), more than one lock.
 */

#ifndef PROPERTY
#define PROPERTY 0 /* 0: both; 1: (s1) only; 2: (s2) only */
#endif

#define MAXE 4  /* epochs of the lock name in the model */
#define NSLOT 3 /* the largest n */
#define NCLIENT 4
#define LEASE 1
#define MARKER 2

byte newest = 0;          /* the newest epoch of the lock; 0: none */
byte kind[MAXE + 1];      /* LEASE or MARKER */
byte marker_n[MAXE + 1];  /* a marker's n */
bool over[MAXE + 1];      /* released: a mutex's lease, or a marker (abandoned) */
byte slot_holder[NSLOT];  /* 0: free, else the holder's id */
byte held_n[NCLIENT + 1]; /* n of each client holding a slot; 0 if none */
byte mutex_holders = 0;
byte slot_holders = 0;
byte mixed = 0;
byte overfull = 0;

/* check is run, atomically, right after an acquisition. */
inline check() {
	mixed = (mutex_holders > 0 && slot_holders > 0);
	overfull = 0;
	j = 1;
	do
	:: j <= NCLIENT ->
		if
		:: held_n[j] > 0 && slot_holders > held_n[j] -> overfull = 1
		:: else -> skip
		fi;
		j++
	:: else -> break
	od;
#if PROPERTY != 2
	assert(mixed == 0);
#endif
#if PROPERTY != 1
	assert(overfull == 0);
#endif
}

/* A mutex acquirer (an Acquire without Slots), twice. */
proctype Mutex(byte id) {
	byte e, k, mine, rounds, j;
	bool isfree;
	do
	:: rounds >= 2 || newest >= MAXE -> break
	:: else ->
		/* LIST and GET of the newest epoch (§5 steps 2-3). */
		atomic { e = newest; k = kind[e]; isfree = (e == 0 || over[e]) }
#ifdef MUTANT_MARKER_LAPSES
		isfree = isfree || k == MARKER;
#endif
		if
		:: e > 0 && k == MARKER && !isfree -> break /* ErrSlotsMismatch */
		:: !isfree -> skip /* held: wait and look again */
		:: isfree ->
			/* Create e+1 with If-None-Match: * (step 4). */
			mine = 0;
			atomic {
				if
				:: newest == e && e < MAXE ->
					newest = e + 1; kind[e + 1] = LEASE; over[e + 1] = 0;
					mutex_holders++; mine = e + 1;
					printf("mutex %d holds epoch %d\n", id, mine);
					check()
				:: else -> skip /* 412: someone else created it */
				fi
			}
			if
			:: mine > 0 ->
				atomic { mutex_holders--; over[mine] = 1; rounds++ }
			:: else -> skip
			fi
		fi
	od
}

/* The mutants of a slot acquirer's decision. */
#ifdef MUTANT_NO_N_CHECK
#define SAME_N(m, n) true
#else
#define SAME_N(m, n) (m == n)
#endif
#ifdef MUTANT_NO_MARKER
#define TAKE_FREE(f) (f)
#else
#define TAKE_FREE(f) false
#endif

/* A slot acquirer with Slots(n), twice. */
proctype Slot(byte id; byte n) {
	byte e, k, m, i, rounds, j, mk;
	bool isfree, got;
	do
	:: rounds >= 2 -> break
	:: else ->
		atomic { e = newest; k = kind[e]; m = marker_n[e]; isfree = (e == 0 || over[e]) }
		if
		:: e > 0 && k == MARKER && !isfree && !SAME_N(m, n) -> break /* ErrSlotsMismatch */
		:: (e > 0 && k == MARKER && !isfree && SAME_N(m, n)) || TAKE_FREE(isfree) ->
			/* One of its n slots, each a mutex (test-and-set). */
			select(i : 0 .. n - 1);
			got = 0;
			atomic {
				if
				:: slot_holder[i] == 0 ->
					slot_holder[i] = id; held_n[id] = n; slot_holders++; got = 1;
					printf("slot client %d (n=%d) holds slot %d\n", id, n, i);
					check()
				:: else -> skip /* held: wait for it or another slot */
				fi
			}
			if
			:: got -> atomic { slot_holder[i] = 0; held_n[id] = 0; slot_holders--; rounds++ }
			:: else -> skip
			fi
		:: !isfree && !(k == MARKER) -> skip /* a mutex's lease: wait for it */
		:: isfree && newest < MAXE ->
			/* Write the marker as epoch e+1, If-None-Match: *. */
			mk = 0;
			atomic {
				if
				:: newest == e ->
					newest = e + 1; kind[e + 1] = MARKER; marker_n[e + 1] = n; over[e + 1] = 0; mk = e + 1;
					printf("slot client %d writes the marker of %d slots at epoch %d\n", id, n, e + 1)
				:: else -> skip
				fi
			}
#ifdef MUTANT_ABANDON_MARKER
			/* Its create's answer was lost or late and the check failed:
			 * it abandons the epoch as it would a lease's, releasing the
			 * marker that others may already use. */
			if
			:: mk > 0 -> over[mk] = 1; printf("slot client %d abandons its marker %d\n", id, mk)
			:: true -> skip
			fi;
#endif
			skip
		:: isfree && newest >= MAXE -> break
		fi
	od
}

init {
	atomic {
		run Mutex(1);
		run Slot(2, 2);
		run Slot(3, 3);
		run Slot(4, 3)
	}
}
