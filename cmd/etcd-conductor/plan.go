package main

// runPlan is a placeholder until its owner lands the real implementation.
func runPlan(args []string) int { return 1 }
