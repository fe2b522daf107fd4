package election

import (
	"context"
	"sync/atomic"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// preferredLock is the Lease lock of a coordinated election, remembering
// for Status the preferred holder of the object version it last saw. It
// reads the lock only inside the calls the elector makes to it, so never
// concurrently with them; Status reads the copy.
type preferredLock struct {
	*resourcelock.LeaseLock
	preferred atomic.Pointer[string]
}

// lastPreferred is spec.preferredHolder of the Lease last seen; "" when
// none or not seen yet.
func (p *preferredLock) lastPreferred() string {
	if s := p.preferred.Load(); s != nil {
		return *s
	}
	return ""
}

func (p *preferredLock) note() {
	name, _ := p.LeaseLock.PreferredHolder()
	p.preferred.Store(&name)
}

func (p *preferredLock) Get(ctx context.Context) (*resourcelock.Record, []byte, error) {
	defer p.note()
	return p.LeaseLock.Get(ctx)
}

func (p *preferredLock) Create(ctx context.Context, r resourcelock.Record) error {
	defer p.note()
	return p.LeaseLock.Create(ctx, r)
}

func (p *preferredLock) Update(ctx context.Context, r resourcelock.Record) error {
	defer p.note()
	return p.LeaseLock.Update(ctx, r)
}

func (p *preferredLock) RequestHandover(ctx context.Context, h lockmeta.Handover) error {
	defer p.note()
	return p.LeaseLock.RequestHandover(ctx, h)
}

func (p *preferredLock) Observe(obj any, deleted bool) (*resourcelock.Record, []byte, error) {
	defer p.note()
	return p.LeaseLock.Observe(obj, deleted)
}
