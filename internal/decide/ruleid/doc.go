// Package ruleid is the type of a planner's rule ids and the one place an id becomes a reason.
// Every planner names the rule behind a decision with a stable id such as
// "rollout/non-participating/dead", qualified by the planner (its first element names one
// planner alone; test/structure checks it), so a reason says who wrote it: the plan command
// prints it, metrics are labelled with it and, through ID.CamelCase, it becomes the condition and
// Event reason ("RolloutNonParticipatingDead"). The planners declare their ids as ID (the
// rollout, membership, memberhealth, recovery, defrag, updatestrategy and seeding planners
// through an alias, RuleID), so none has to import another planner to spell a reason. It imports
// nothing of the project.
package ruleid
