// Package setting holds the validation rules that more than one library
// constructor applies, each in one place, and the typed error they return.
// Constructors name a setting as their API does; cmd/ maps that name to
// the flag the operator gave (Error.For), so the rule, the bad value and
// the fix are written once.
package setting
