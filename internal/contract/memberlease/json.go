package memberlease

import "encoding/json"

// jsonValue is an annotation value holding v in JSON. The values this package writes hold only
// strings, numbers and times, which always encode, so a failure is a programming error.
func jsonValue(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(raw)
}
