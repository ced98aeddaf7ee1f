// Package rtkind marks a context with what its Redis round trips are for,
// so that a counting hook can tell them apart: a page's round trips are
// the crawl's cost per page, robots.txt's are counted on their own.
package rtkind

import "context"

// Kind is what a context's Redis round trips are for.
type Kind int

const (
	// Page is the default: a page's permit, settlement and next URL.
	Page Kind = iota
	// Robots is robots.txt: its cache, its fetch lease and its permit.
	Robots
)

type key struct{}

// With returns ctx marked with k.
func With(ctx context.Context, k Kind) context.Context {
	return context.WithValue(ctx, key{}, k)
}

// Of is the Kind ctx is marked with (Page if none).
func Of(ctx context.Context) Kind {
	k, _ := ctx.Value(key{}).(Kind)
	return k
}
