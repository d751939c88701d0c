package tfstate

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestMark_EveryEpochGivesOtherBytesThatStillReadAsTheState(t *testing.T) {
	state := []byte("{\n  \"version\": 4,\n  \"serial\": 3\n}\n")
	seen := map[string]uint64{}
	for _, epoch := range []uint64{1, 2, 3, 4, 5, 6, 7, 8, 255, 256, 1 << 40, 1<<64 - 1} {
		for _, s := range [][]byte{state, nil} { // a state, and a placeholder
			body := marked(s, epoch)
			if prev, dup := seen[string(body)]; dup {
				t.Fatalf("epochs %d and %d give the same body %q", prev, epoch, body)
			}
			seen[string(body)] = epoch
			if got, ok := markEpoch(body); !ok || got != epoch {
				t.Errorf("markEpoch(marked(_, %d)) = %d, %v", epoch, got, ok)
			}
			if got := unmarked(body); !bytes.Equal(got, s) {
				t.Errorf("unmarked(marked(%q, %d)) = %q", s, epoch, got)
			}
			if s != nil && !json.Valid(body) {
				t.Errorf("marked state %q is not valid JSON", body)
			}
			// Re-marking a marked state replaces the mark.
			if got := marked(unmarked(marked(s, epoch)), epoch+1); !bytes.Equal(got, marked(s, epoch+1)) {
				t.Errorf("re-marking under %d = %q", epoch+1, got)
			}
		}
	}
	if _, ok := markEpoch(state); ok {
		t.Error("a state as Terraform writes it reads as marked")
	}
	if got := unmarked([]byte{}); got != nil {
		t.Errorf("unmarked(empty) = %q, want nil", got)
	}
}
