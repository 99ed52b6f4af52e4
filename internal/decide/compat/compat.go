package compat

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// Reasons why a field is ignored, one per group of fields.
const (
	ReasonNoBackupStore     = "no backups are taken without spec.backup.store.provider"
	ReasonBackupSidecarOnly = "etcd-backup-restore's own settings: the member-agent takes the snapshots, without a server or compaction job"
	ReasonOwnSelector       = "member pods are selected by the operator's own labels, which never change"
	ReasonOwnClaimName      = "the data volume claim template is always named data"
	ReasonOwnSecurity       = "the member containers' security context is the operator's, never root"
	ReasonNoWrapper         = "etcd runs without etcd-druid's etcd-wrapper"
	ReasonMTLSOnly          = "clients authenticate with mTLS; etcd's own user authentication is not configured"
)

// backupFieldsActedOn are the spec.backup keys the member-agent's backups use.
var backupFieldsActedOn = map[string]bool{
	"store": true, "fullSnapshotSchedule": true, "deltaSnapshotPeriod": true,
	"garbageCollectionPolicy": true, "maxBackupsLimitBasedGC": true, "garbageCollectionPeriod": true,
	"compression": true,
}

// backupStoreSet is etcd-druid's test for backups being configured: a store with a provider.
func backupStoreSet(b *druidv1alpha1.BackupSpec) bool {
	return b.Store != nil && b.Store.Provider != nil && *b.Store.Provider != ""
}

// Field is a set field the operator ignores.
type Field struct {
	// Path is the field's JSON path, e.g. spec.backup.store.
	Path   string
	Reason string
}

func (f Field) String() string { return f.Path + " (" + f.Reason + ")" }

// Ignored lists the fields set in spec that the operator accepts but does not act on, in path
// order. Unset and zero-length fields are not listed.
func Ignored(spec *druidv1alpha1.EtcdSpec) []Field {
	var out []Field
	add := func(set bool, path, reason string) {
		if set {
			out = append(out, Field{Path: path, Reason: reason})
		}
	}
	add(spec.Selector != nil, "spec.selector", ReasonOwnSelector)
	if spec.Backup != nil {
		for _, key := range setKeys(spec.Backup) {
			switch {
			case !backupStoreSet(spec.Backup):
				add(true, "spec.backup."+key, ReasonNoBackupStore)
			case !backupFieldsActedOn[key]:
				add(true, "spec.backup."+key, ReasonBackupSidecarOnly)
			}
		}
	}
	add(spec.VolumeClaimTemplate != nil, "spec.volumeClaimTemplate", ReasonOwnClaimName)
	add(spec.RunAsRoot != nil, "spec.runAsRoot", ReasonOwnSecurity)
	add(spec.Etcd.WrapperPort != nil, "spec.etcd.wrapperPort", ReasonNoWrapper)
	add(spec.Etcd.AuthSecretRef != nil, "spec.etcd.authSecretRef", ReasonMTLSOnly)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Summary is one line naming the ignored fields grouped by reason, for an Event; "" when none.
func Summary(fields []Field) string {
	if len(fields) == 0 {
		return ""
	}
	byReason := map[string][]string{}
	var reasons []string
	for _, f := range fields {
		if _, seen := byReason[f.Reason]; !seen {
			reasons = append(reasons, f.Reason)
		}
		byReason[f.Reason] = append(byReason[f.Reason], f.Path)
	}
	parts := make([]string, 0, len(reasons))
	for _, r := range reasons {
		parts = append(parts, fmt.Sprintf("%s (%s)", strings.Join(byReason[r], ", "), r))
	}
	return fmt.Sprintf("%d field(s) accepted but ignored: %s", len(fields), strings.Join(parts, "; "))
}

// setKeys lists the JSON keys v serialises with; omitempty leaves out the unset ones.
func setKeys(v any) []string {
	raw, err := json.Marshal(v)
	if err != nil {
		// A spec the apiserver accepted always serialises; say so rather than hide it.
		return []string{"(unserialisable: " + err.Error() + ")"}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return []string{"(unserialisable: " + err.Error() + ")"}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
