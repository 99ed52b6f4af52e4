// Package operator assembles the manager: scheme, controllers and their dependencies. The manager
// command and the integration tests build the operator the same way, through New.
package operator
