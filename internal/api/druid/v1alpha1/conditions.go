package v1alpha1

// FindCondition returns the condition of type t in conds, nil when there is none. The pointer
// is into conds, so a caller may update the condition in place.
func FindCondition(conds []Condition, t ConditionType) *Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
