package main

// runManager is a placeholder until its owner lands the real implementation.
func runManager(args []string) int { return 1 }
