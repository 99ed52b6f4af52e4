package workload

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

const (
	// auditRequestTimeout is generous: the audit checks durability, not availability.
	auditRequestTimeout = 5 * time.Second
	auditPageSize       = 1000
	auditRetryPause     = 200 * time.Millisecond
)

// VerifyAcknowledged reads the run's keys back with linearizable reads and returns the
// acknowledged keys that are missing or hold another value than the one written. It tries the
// endpoints in turn until one serves a complete read or ctx ends (then err is set), so it can
// be called while the cluster is still recovering.
func VerifyAcknowledged(ctx context.Context, endpoints []Endpoint, creds conductortls.ClientMaterial, result WriteResult) (lost []string, err error) {
	if result.Prefix == "" {
		return nil, errors.New("audit: write result has no key prefix")
	}
	if len(result.Acked) == 0 {
		return nil, nil
	}
	conns := newMemberConns(creds)
	defer conns.close()

	var errs []error
	for {
		members, dialFailures := conns.sync(endpoints)
		for _, f := range dialFailures {
			errs = append(errs, f.err)
		}
		for _, c := range members {
			stored, err := readPrefix(ctx, c, result.Prefix)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for _, a := range result.Acked {
				if v, ok := stored[a.Key]; !ok || v != a.Value {
					lost = append(lost, a.Key)
				}
			}
			return lost, nil
		}
		if len(members) == 0 && len(dialFailures) == 0 {
			return nil, errors.New("audit: no endpoints")
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("audit of %d acknowledged keys under %s: no member served a linearizable read: %w",
				len(result.Acked), result.Prefix, errors.Join(append(errs[max(0, len(errs)-len(endpoints)):], ctx.Err())...))
		case <-time.After(auditRetryPause):
		}
	}
}

// readPrefix returns every key under prefix with its value, read page by page at the revision
// of the first (linearizable) page, so the pages form one snapshot.
func readPrefix(ctx context.Context, c *memberConn, prefix string) (map[string]string, error) {
	stored := map[string]string{}
	from, end := prefix, prefixEnd(prefix)
	var rev int64
	for {
		resp, err := rangePage(ctx, c, from, end, rev)
		if err != nil {
			return nil, fmt.Errorf("audit: range %s on member %s at %s: %w", from, c.ep.Name, c.ep.Address, err)
		}
		if rev == 0 {
			rev = resp.GetHeader().GetRevision()
		}
		for _, kv := range resp.GetKvs() {
			stored[string(kv.GetKey())] = string(kv.GetValue())
		}
		if !resp.GetMore() || len(resp.GetKvs()) == 0 {
			return stored, nil
		}
		from = string(resp.GetKvs()[len(resp.GetKvs())-1].GetKey()) + "\x00"
	}
}

func rangePage(ctx context.Context, c *memberConn, from, end string, rev int64) (*pb.RangeResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, auditRequestTimeout)
	defer cancel()
	return c.kv.Range(ctx, &pb.RangeRequest{
		Key:      []byte(from),
		RangeEnd: []byte(end),
		Limit:    auditPageSize,
		Revision: rev,
		// Serializable stays false: a linearizable read, answered only with a quorum's consent.
	}, failFast)
}
