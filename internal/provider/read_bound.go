package provider

import (
	"context"
	"errors"
	"fmt"
)

// readContext bounds a read of the store (a data source's or a resource's
// Read, a list) by readTimeout: a store that answers too slowly, or whose
// listing would not end, fails the plan instead of holding it.
func readContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, readTimeout, errReadTimeout)
}

// errReadTimeout is the cause of a read that readTimeout ended.
var errReadTimeout = fmt.Errorf("the read did not finish within %s: the store answers too slowly, or not at all; "+
	"check the provider's endpoints.s3 and the network", readTimeout)

// readFailure returns err, the failure of a read bounded by readContext's
// ctx, saying so when the bound ended it.
func readFailure(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), errReadTimeout) {
		return fmt.Errorf("%w (%w)", err, errReadTimeout)
	}
	return err
}
