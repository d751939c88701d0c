package storecheck

import (
	"context"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/internal/bridge"
)

// VerifyAsGeneralPurpose is Verify of a client whose bucket it reads as a
// general purpose bucket's, in key order, whatever the bucket's name says.
func VerifyAsGeneralPurpose(ctx context.Context, client *s3lock.Client) error {
	p, err := newProbe(client, "")
	if err != nil {
		return err
	}
	p.c = generalPurpose{p.c}
	return p.verify(ctx)
}

// generalPurpose is a client that says its bucket is not a directory bucket.
type generalPurpose struct{ bridge.Client }

func (generalPurpose) Directory() bool { return false }
