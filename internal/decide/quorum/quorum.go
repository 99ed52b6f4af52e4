package quorum

// Of is the number of voters a cluster of voters voting members needs to commit (and to elect a
// leader): a strict majority, voters/2+1. Of(0) is 1: a cluster without voters has no quorum.
func Of(voters int) int { return voters/2 + 1 }

// Headroom is how many voters a cluster of voters voting members can lose and still have a
// quorum: voters − Of(voters), never below 0. A cluster of one or two voters has none.
func Headroom(voters int) int { return max(voters-Of(voters), 0) }
