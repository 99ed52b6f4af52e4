package workload

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// register is the state of one key: absent until a Put, then its value. Comparable, so
// porcupine's default equality (==) applies.
type register struct {
	found bool
	value string
}

func (r register) String() string {
	if !r.found {
		return "absent"
	}
	return fmt.Sprintf("%q", r.value)
}

// kvInput is a Put (put true) or a Get of key.
type kvInput struct {
	put   bool
	key   string
	value string
}

// opMeta is what the visualization and the error message show beyond the model's input and
// output: which member, which outcome.
type opMeta struct {
	member  string
	outcome Outcome
}

// registerModel is a set of independent registers, one per key, checked a key at a time: the
// writer writes every key once with a value of its own, so no operation spans two keys and a
// history is linearizable exactly when each key's part is. Per key, a Put sets the value and a
// Get must return the current one. That catches, on any key:
//   - a Get returning "absent" after a Put of the key was acknowledged before the Get was sent
//     (an acknowledged write lost or rolled back, a stale read, a second cluster);
//   - a Get returning a value whose Put was sent after the Get returned (a read of the future);
//   - a Get returning the value and a later one "absent" (a rollback between them).
var registerModel = porcupine.Model{
	Partition: partitionByKey,
	Init:      func() any { return register{} },
	Step: func(state, input, output any) (bool, any) {
		in := input.(kvInput)
		if in.put {
			return true, register{found: true, value: in.value}
		}
		return output.(register) == state.(register), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(kvInput)
		if in.put {
			return fmt.Sprintf("put(%q)", in.value)
		}
		return fmt.Sprintf("get() -> %s", output.(register))
	},
	DescribeState: func(state any) string { return state.(register).String() },
	DescribeOperationMetadata: func(info any) string {
		m, ok := info.(opMeta)
		if !ok {
			return ""
		}
		if m.outcome != "" {
			return fmt.Sprintf("%s (%s)", m.member, m.outcome)
		}
		return m.member
	},
}

// partitionByKey splits a history into one history per key, in the order the keys first appear.
func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	index := map[string]int{}
	var parts [][]porcupine.Operation
	for _, op := range history {
		key := op.Input.(kvInput).key
		i, ok := index[key]
		if !ok {
			i = len(parts)
			index[key] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}
