// Package plantest gives the tests of the packages around plan a lock for
// any configuration without resolving anything: Lock pins every image
// input to its source string, as an unlocked plan compares them
// (plan.AgainstSides), so that plan.Desired plans the configuration.
// Production code never imports it.
package plantest
