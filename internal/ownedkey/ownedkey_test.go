package ownedkey

import (
	"context"
	"testing"
	"time"

	"github.com/polite-crawler/polite/internal/redistest"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

func TestDelete(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := srv.Client()
	defer rdb.Close()
	if err := rdb.Set(ctx, "k", "mine", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	// Someone else's token leaves the key alone.
	if ok, err := Delete(ctx, rdb, "k", "theirs"); ok || err != nil {
		t.Fatalf("Delete with another token: %v %v, want false <nil>", ok, err)
	}
	if v := rdb.Get(ctx, "k").Val(); v != "mine" {
		t.Fatalf("key holds %q after another token's Delete, want mine", v)
	}
	// The holder's token deletes it, once.
	if ok, err := Delete(ctx, rdb, "k", "mine"); !ok || err != nil {
		t.Fatalf("Delete with the holder's token: %v %v, want true <nil>", ok, err)
	}
	if n := rdb.Exists(ctx, "k").Val(); n != 0 {
		t.Fatal("key still there after the holder's Delete")
	}
	if ok, err := Delete(ctx, rdb, "k", "mine"); ok || err != nil {
		t.Fatalf("Delete of a missing key: %v %v, want false <nil>", ok, err)
	}
	// Redis that lost its script cache runs it again (EVAL fallback).
	rdb.Set(ctx, "k", "mine", time.Minute)
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := Delete(ctx, rdb, "k", "mine"); !ok || err != nil {
		t.Fatalf("Delete after SCRIPT FLUSH: %v %v, want true <nil>", ok, err)
	}
}
