package main

import "time"

// mutant is one deliberate mistake in the protocol code: a rule of
// s3lock/PROTOCOL.md broken at the sites that implement it, and the named
// tests that must fail when it is.
type mutant struct {
	// ID names the mutant (the letters of issue 22).
	ID string
	// Rule is the rule the mutant breaks, in one line.
	Rule string
	// Sites are the edits, each of a snippet that occurs exactly once in
	// its file.
	Sites []site
	// Pkgs are the packages whose tests must kill the mutant.
	Pkgs []string
	// Run is the go test -run regexp of the tests that must kill it.
	Run string
	// Tests are the tests Run selects, as s3lock/PROTOCOL.md's table of
	// mutants names them.
	Tests []string
	// Bound is how long the tests may take: a run that hangs past it
	// counts as killed by a timeout.
	Bound time.Duration
	// CI is set for the mutants make mutants-ci runs.
	CI bool
}

// site is one edit of a mutant: Old, which must occur exactly once in File
// (relative to the module root), becomes New.
type site struct {
	File, Old, New string
}

// catalogue is every mutant, in the order make mutants runs them.
var catalogue = []mutant{
	{
		ID:   "A",
		Rule: "waiters judge a lease lapsed at half its validity (remaining() counts validity/2 + slack - age)",
		Sites: []site{{File: "s3lock/timing.go",
			Old: "return o.body.validity() + serverSlack - age, true",
			New: "return o.body.validity()/2 + serverSlack - age, true"}},
		Pkgs: []string{"./s3lock/"}, Run: "^(TestLapse_JudgedAtValidityPlusSlackByTheStoresClock|TestTakeover_LongLease)$",
		Tests: []string{"TestLapse_JudgedAtValidityPlusSlackByTheStoresClock", "TestTakeover_LongLease"},
		Bound: 4 * time.Minute, CI: true,
	},
	{
		ID:   "B",
		Rule: "a holder trusts its lease from when the answer arrived, for the whole validity, without the safety margin",
		Sites: []site{
			{File: "s3lock/lease.go",
				Old: "l.trust = capTrust(trustFor(sent, next.validity()), l.capAt, &next)",
				New: "l.trust = capTrust(trust{from: l.c.cfg.clock.Now(), until: l.c.cfg.clock.Now().Add(next.validity()), margin: safetyMargin(next.validity())}, l.capAt, &next) // mutant B"},
			{File: "s3lock/acquire.go",
				Old: "trust: trustFor(now, p.validity()), capAt: capAt}, nil",
				New: "trust: trust{from: now, until: c.cfg.clock.Now().Add(p.validity()), margin: safetyMargin(p.validity())}, capAt: capAt}, nil // mutant B"},
		},
		Pkgs: []string{"./s3lock/"}, Run: "^TestTakeover_LongLease$", Tests: []string{"TestTakeover_LongLease"},
		Bound: 4 * time.Minute, CI: true,
	},
	{
		ID:   "C",
		Rule: "an unknown outcome of a create (an epoch's, a ticket's) is taken as success without reading the key back (a 412 may be a rival's create)",
		Sites: []site{{File: "s3lock/settle.go",
			Old: "\tfound, rerr := read(rctx, w.key)\n",
			New: "\tif w.etag == \"\" {\n\t\tcancel()\n\t\treturn settled[O]{verdict: landed} // mutant C\n\t}\n\tfound, rerr := read(rctx, w.key)\n"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestAmbiguousCreate$", Tests: []string{"TestAmbiguousCreate"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "D",
		Rule: "a release (expired: true) is written without If-Match",
		Sites: []site{{File: "s3lock/store.go",
			Old: "\t} else {\n\t\tin.IfMatch = aws.String(etag)\n\t}\n",
			New: "\t} else if !bytes.Contains(body, []byte(`\"expired\":true`)) { // mutant D\n\t\tin.IfMatch = aws.String(etag)\n\t}\n"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestRelease_AfterForceReleaseIsLost$", Tests: []string{"TestRelease_AfterForceReleaseIsLost"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "E",
		Rule: "the acquirer skips the lapse check before creating the next epoch: a live lease counts as free",
		Sites: []site{{File: "s3lock/acquire.go",
			Old: "case !free(prev) && !sameObject(prev, m.known.lapsed):",
			New: "case false && !free(prev) && !sameObject(prev, m.known.lapsed): // mutant E"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestTryAcquire_HeldThenReleased$", Tests: []string{"TestTryAcquire_HeldThenReleased"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "F",
		Rule: "a compare-and-swap write (renewal, release, heartbeat) whose outcome was unknown is confirmed when the read-back finds the ETag it held (the write did not land)",
		Sites: []site{{File: "s3lock/settle.go",
			Old: "\tcase w.etag != \"\" && etag == w.etag:\n\t\ts.verdict = unchanged\n",
			New: "\tcase w.etag != \"\" && etag == w.etag:\n\t\ts.verdict = landed // mutant F\n"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestAmbiguousRenewAndRelease$", Tests: []string{"TestAmbiguousRenewAndRelease"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "G",
		Rule: "cleanup deletes the newest epoch it listed (the one its acquisition superseded), which has no successor to judge its age by",
		Sites: []site{{File: "s3lock/cleanup.go",
			Old: "\t\tdefault:\n\t\t\tcontinue\n\t\t}\n",
			New: "\t\tdefault: // mutant G\n\t\t}\n"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestCleanup_StaleContenderFindsItsEpochStillThere$",
		Tests: []string{"TestCleanup_StaleContenderFindsItsEpochStillThere"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "H",
		Rule: "fence.Put writes without its fence check, over an object that records a newer epoch",
		Sites: []site{{File: "s3lock/fence/fence.go",
			Old: "case current > w.epoch:",
			New: "case false && current > w.epoch: // mutant H"}},
		Pkgs: []string{"./s3lock/fence/"}, Run: "^TestPut_StaleLeaseCannotOverwrite$", Tests: []string{"TestPut_StaleLeaseCannotOverwrite"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "I",
		Rule: "the line is served out of order: a waiter counts the tickets after its own as ahead of it",
		Sites: []site{{File: "s3lock/line.go",
			Old: "\t\tcase (t.key < p.ref.key || p.ref.key == \"\") && (!p.shared || !t.shared):\n\t\t\tst.ahead++\n",
			New: "\t\tcase (t.key > p.ref.key || p.ref.key == \"\") && (!p.shared || !t.shared): // mutant I\n\t\t\tst.ahead++\n"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestLine_ServedInJoiningOrder$", Tests: []string{"TestLine_ServedInJoiningOrder"},
		Bound: 2 * time.Minute, CI: true,
	},
	{
		ID:   "J",
		Rule: "a slot lock's marker lapses as a lease does: judged by free() before it is read as a marker (model: MUTANT_MARKER_LAPSES)",
		Sites: []site{
			{File: "s3lock/timing.go",
				Old: "\tcase o.body.marker():\n\t\treturn false // a slot lock's marker never lapses (§14)\n",
				New: "\t// mutant J\n"},
			{File: "s3lock/acquire.go",
				Old: "case prev.body.marker():",
				New: "case prev.body.marker() && !free(prev): // mutant J"},
		},
		Pkgs: []string{"./s3lock/"}, Run: "^TestSlots_MarkerNeverLapses$", Tests: []string{"TestSlots_MarkerNeverLapses"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "K",
		Rule: "cleanup deletes an epoch without waiting for its successor to be cleanupAge old (model: MUTANT_NO_CLEANUP_AGE)",
		Sites: []site{{File: "s3lock/cleanup.go",
			Old: "if date.Sub(succ.lastModified) >= cleanupAge {",
			New: "if true || date.Sub(succ.lastModified) >= cleanupAge { // mutant K"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestCleanup_StaleContenderFindsItsEpochStillThere$",
		Tests: []string{"TestCleanup_StaleContenderFindsItsEpochStillThere"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "L",
		Rule: "step 5 skipped: an attempt slower than attemptWindow does not list again for a newer epoch (model: MUTANT_NO_RELIST)",
		Sites: []site{{File: "s3lock/acquire.go",
			Old: "if c.cfg.clock.Now().Sub(start) <= attemptWindow {",
			New: "if true || c.cfg.clock.Now().Sub(start) <= attemptWindow { // mutant L"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestStaleContender_RecreatesDeletedEpoch$", Tests: []string{"TestStaleContender_RecreatesDeletedEpoch"},
		Bound: 2 * time.Minute,
	},
	{
		ID:   "M",
		Rule: "the trust deadline is no timer: a lease nothing renews any more (its release given up) is not ended at its deadline",
		Sites: []site{{File: "s3lock/lease.go",
			Old: "lost, _ = l.endLocked(l.expiredError(reason, why, when, l.writeErr))",
			New: "_, _ = why, when // mutant M"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestLeaseDeadline_AbandonedReleaseStillEndsAtTheDeadline$",
		Tests: []string{"TestLeaseDeadline_AbandonedReleaseStillEndsAtTheDeadline"},
		Bound: 2 * time.Minute,
	},
	{
		ID:   "N",
		Rule: "step 5's LIST after creating a lock's first epoch is skipped: a listing that hides the lock's objects goes unnoticed",
		Sites: []site{{File: "s3lock/acquire.go",
			Old: "if epoch != 1 {",
			New: "if true || epoch != 1 { // mutant N"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestNameCollision_HiddenListingIsDetected$", Tests: []string{"TestNameCollision_HiddenListingIsDetected"},
		Bound: 2 * time.Minute, CI: true,
	},
	{
		ID:   "O",
		Rule: "abandon releases a slot lock's marker it wrote, as it would a lease (model: MUTANT_ABANDON_MARKER)",
		Sites: []site{{File: "s3lock/acquire.go",
			Old: "case p.Slots > 0:",
			New: "case false && p.Slots > 0: // mutant O"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestSlots_AbandonNeverReleasesAMarker$", Tests: []string{"TestSlots_AbandonNeverReleasesAMarker"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "P",
		Rule: "the state store's Lock does not seal the state under its new epoch: a stale run's write still lands after a newer run locked",
		Sites: []site{{File: "internal/tfstate/lock.go",
			Old: "\tetag, placeholder, err := s.seal(ctx, s.Key(ws), lease.Token().Epoch)\n",
			New: "\t_, etag, err := s.get(ctx, s.Key(ws)) // mutant P\n\tplaceholder := false\n"}},
		Pkgs: []string{"./internal/tfstate/"}, Run: "^TestStore_AStaleRunsWriteNeverLandsAfterANewerRunLocked$",
		Tests: []string{"TestStore_AStaleRunsWriteNeverLandsAfterANewerRunLocked"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "Q",
		Rule: "the state store writes a locked state with a plain PUT, not fenced by its epoch",
		Sites: []site{{File: "internal/tfstate/objects.go",
			Old: "\tout, err := fence.Put(ctx, s.client, lease.Token().Epoch, in)\n",
			New: "\tin.IfMatch = nil // mutant Q\n\tout, err := s.api.PutObject(ctx, in)\n"}},
		Pkgs: []string{"./internal/tfstate/"}, Run: "^TestStore_AStaleRunsWriteNeverLandsAfterANewerRunLocked$",
		Tests: []string{"TestStore_AStaleRunsWriteNeverLandsAfterANewerRunLocked"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "R",
		Rule: "a directory bucket's listing is read one page, not whole: the newest epoch is taken from a sample",
		Sites: []site{{File: "s3lock/store.go",
			Old: "\t\tl.add(name, startAfter, out)\n\t\treturn true // to the end",
			New: "\t\tl.add(name, startAfter, out)\n\t\treturn false // mutant R: one page"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestDirectoryBuckets_TheHolderIsFoundInAnUnorderedListing$",
		Tests: []string{"TestDirectoryBuckets_TheHolderIsFoundInAnUnorderedListing"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "S",
		Rule: "a directory bucket is read in key order, as a general purpose bucket is",
		Sites: []site{{File: "s3lock/options.go",
			Old: "func isDirectoryBucket(bucket string) bool { return strings.HasSuffix(bucket, directoryBucketSuffix) }",
			New: "func isDirectoryBucket(bucket string) bool { return bucket == directoryBucketSuffix }"}},
		Pkgs: []string{"./s3lock/", "./s3lock/storecheck/"}, Run: "^TestDirectoryBuckets_",
		Tests: []string{"TestDirectoryBuckets_TheHolderIsFoundInAnUnorderedListing", "TestDirectoryBuckets_VerifyReportsTheListingOrder", "TestDirectoryBuckets_KeyOrderWouldMissTheHolder"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "T",
		Rule: "a slot listed is judged lapsed by the shortest validity of its size class, not the longest: a live slot is taken",
		Sites: []site{{File: "s3lock/sizecode.go",
			Old: "\tcase age >= bound+serverSlack:\n",
			New: "\tcase age >= bound/2+serverSlack:\n"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestSizeCode_ListingNeverFreesALiveLease$",
		Tests: []string{"TestSizeCode_ListingNeverFreesALiveLease"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "U",
		Rule: "epoch objects are written without their size code: a listing misreads held slots as released",
		Sites: []site{{File: "s3lock/payload.go",
			Old: "\tb = padToSizeCode(b, p)\n",
			New: "\t_ = padToSizeCode // mutant U\n"}},
		Pkgs: []string{"./s3lock/"}, Run: "^(TestSizeCode_ListingNeverFreesALiveLease|TestRequestCounts_Slots)$",
		Tests: []string{"TestSizeCode_ListingNeverFreesALiveLease", "TestRequestCounts_Slots"},
		Bound: 2 * time.Minute, CI: true,
	},
	{
		ID:   "V",
		Rule: "the http backend writes a state under its lock ID with a plain PUT, not fenced by the lock's epoch",
		Sites: []site{{File: "internal/tfhttp/handlers.go",
			Old: "\terr := g.store.WriteUnder(r.Context(), ws, g.lockID, body)\n",
			New: "\tst, _ := s.store(key, s.cfg.State) // mutant V\n\terr := st.Write(r.Context(), ws, body)\n"}},
		Pkgs: []string{"./internal/tfhttp/"}, Run: "^(TestServer_AStaleRunsWriteIsRefusedByTheFence|TestServer_LockReadWriteUnlock)$",
		Tests: []string{"TestServer_AStaleRunsWriteIsRefusedByTheFence", "TestServer_LockReadWriteUnlock"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "W",
		Rule: "a lock set takes its locks in the caller's order, not the global one: two sets taking {a, b} and {b, a} deadlock",
		Sites: []site{{File: "s3lock/lockset/lockset.go",
			Old: "\tslices.Sort(order)\n",
			New: "\t// mutant W: the caller's order\n"}},
		Pkgs: []string{"./s3lock/lockset/"}, Run: "^TestAcquire_OppositeOrdersNeverDeadlockNorOverlap$",
		Tests: []string{"TestAcquire_OppositeOrdersNeverDeadlockNorOverlap"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "X",
		Rule: "a direct create does not heed the LIST sent with it: a waiter paused after its poll holds a deleted epoch created again",
		Sites: []site{{File: "s3lock/direct.go",
			Old: "\tif err := m.directListed(ctx, h, r.epoch, lr); err != nil {\n\t\treturn nil, err\n\t}\n",
			New: "\t_ = m.directListed // mutant X: the LIST is not heeded\n"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestDirectCreate_AfterAPauseNeverReusesADeletedEpoch$",
		Tests: []string{"TestDirectCreate_AfterAPauseNeverReusesADeletedEpoch"},
		Bound: 2 * time.Minute, CI: true,
	},
	{
		ID:   "Y",
		Rule: "renewals ignore the lease's cap (WithMaxHold): a renewal near it writes the whole lease, and its trust runs past the cap",
		Sites: []site{
			{File: "s3lock/lease.go",
				Old: "validity := l.renewalValidity(now)",
				New: "validity := l.validity // mutant Y"},
			{File: "s3lock/lease.go",
				Old: "l.trust = capTrust(trustFor(sent, next.validity()), l.capAt, &next)",
				New: "l.trust = trustFor(sent, next.validity()) // mutant Y"},
		},
		Pkgs: []string{"./s3lock/"}, Run: "^TestMaxHold_RenewalsEndAtTheCap$", Tests: []string{"TestMaxHold_RenewalsEndAtTheCap"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "Z",
		Rule: "an exclusive acquirer over a shared epoch trusts its epoch at once, without waiting for the shares below it",
		Sites: []site{{File: "s3lock/acquire.go",
			Old: "\tif a.pending {\n\t\tif err := m.awaitShares(ctx, lease); err != nil {",
			New: "\tif false && a.pending { // mutant Z\n\t\tif err := m.awaitShares(ctx, lease); err != nil {"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestShared_ManyHoldersAtOnce$", Tests: []string{"TestShared_ManyHoldersAtOnce"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "AA",
		Rule: "a shared acquirer passes a live pending epoch: it creates a shared epoch above the writer that waits for the shares",
		Sites: []site{{File: "s3lock/shared.go",
			Old: "\t\t\tif err := m.busy(prev, l.newest, l.page); err != nil {\n",
			New: "\t\t\tif err := m.busy(prev, l.newest, l.page); err != nil && !prev.body.Pending { // mutant AA\n"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestShared_NewReadersWaitBehindAPendingWriter$",
		Tests: []string{"TestShared_NewReadersWaitBehindAPendingWriter"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "AB",
		Rule: "a writer over an ended pending epoch takes the lock as over an ended exclusive one, without waiting for the shares",
		Sites: []site{{File: "s3lock/acquire.go",
			Old: "a.pending = pendingOver(prev)",
			New: "a.pending = prev.body.sharedEpoch() // mutant AB"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestShared_WriterAfterAPendingWriterGaveUpWaitsForTheShares$",
		Tests: []string{"TestShared_WriterAfterAPendingWriterGaveUpWaitsForTheShares"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "AC",
		Rule: "a pending epoch's release drops the mark: the next writer does not wait for the shares its writer gave up on",
		Sites: []site{{File: "s3lock/lease.go",
			Old: "\tnext.Released = true\n\tnext.ReleasedAt = now.UTC()\n",
			New: "\tnext.Released = true\n\tnext.ReleasedAt = now.UTC()\n\tif next.Pending { // mutant AC\n\t\tnext.Pending, next.Format = false, 1\n\t}\n"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestShared_WriterAfterAPendingWriterGaveUpWaitsForTheShares$",
		Tests: []string{"TestShared_WriterAfterAPendingWriterGaveUpWaitsForTheShares"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "AD",
		Rule: "a writer waits only for the shares of the epoch below its own, not for those of older shared epochs",
		Sites: []site{{File: "s3lock/shared.go",
			Old: "ok && e < ws.epoch {",
			New: "ok && e == ws.epoch-1 { // mutant AD"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestShared_WriterWaitsForSharesOfOlderSharedEpochs$",
		Tests: []string{"TestShared_WriterWaitsForSharesOfOlderSharedEpochs"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "AE",
		Rule: "a shared acquirer trusts its share without the check that no epoch came above its shared epoch",
		Sites: []site{{File: "s3lock/shared.go",
			Old: "\tif err := c.checkShare(ctx, h); err != nil {\n",
			New: "\tif err := error(nil); err != nil { // mutant AE: no check\n"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestShared_ReaderWithdrawsWhenAWriterCameBeforeItsShareLanded$",
		Tests: []string{"TestShared_ReaderWithdrawsWhenAWriterCameBeforeItsShareLanded"},
		Bound: time.Minute, CI: true,
	},
	{
		ID:   "AF",
		Rule: "a shared waiter in line counts no ticket ahead of it: it passes a writer that joined before it",
		Sites: []site{{File: "s3lock/line.go",
			Old: "&& (!p.shared || !t.shared):",
			New: "&& !p.shared: // mutant AF"}},
		Pkgs: []string{"./s3lock/"}, Run: "^TestLine_SharedWaitersBehindAWriterWait$",
		Tests: []string{"TestLine_SharedWaitersBehindAWriterWait"},
		Bound: time.Minute, CI: true,
	},
}
