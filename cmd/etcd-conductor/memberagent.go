package main

// runMemberAgent is a placeholder until its owner lands the real implementation.
func runMemberAgent(args []string) int { return 1 }
