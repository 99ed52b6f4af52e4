package memberlease

import "time"

// DefaultRenewInterval is how often the sidecar renews its member Lease when its pod does not
// say (--interval). The operator's pods pass their own interval, usually shorter; timing on the
// operator's side that waits for a renewal to land (the handover's catch-up of Lease roles)
// allows for this longer one, so it holds for any member pod.
const DefaultRenewInterval = 5 * time.Second
