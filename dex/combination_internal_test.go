package dex

import (
	"strings"
	"testing"
	"time"
)

// AnyCombinationOf lists each condition once (a condition in two groups
// under one ID), names the groups by ID, and refuses a condition without
// an ID, two different conditions under one ID, and a group that is not
// an AllOf or a condition.
//
// Covers: E32
func TestAnyCombinationOf_Proto(t *testing.T) {
	ch := DefineChannel[int]("x")
	a := ch.ForOne().WithID("a")
	w, err := AnyCombinationOf(AllOf(a, ch.ForN(2).WithID("b")), AllOf(a, Timer(time.Hour).WithID("t")), Timer(time.Minute).WithID("m")).waitProto()
	if err != nil {
		t.Fatal(err)
	}
	c := w.GetAnyCombinationOf()
	var ids []string
	for _, pc := range c.GetConditions() {
		ids = append(ids, pc.GetId())
	}
	var groups []string
	for _, g := range c.GetGroups() {
		groups = append(groups, strings.Join(g.GetConditionIds(), "+"))
	}
	if got := strings.Join(ids, ",") + " " + strings.Join(groups, "|"); got != "a,b,t,m a+b|a+t|m" {
		t.Fatalf("got %s", got)
	}
	for name, bad := range map[string]Wait{
		"no ID":        AnyCombinationOf(AllOf(ch.ForOne())),
		"one ID twice": AnyCombinationOf(AllOf(a), AllOf(ch.ForN(3).WithID("a"))),
		"anyOf group":  AnyCombinationOf(AnyOf(a)),
		"no groups":    AnyCombinationOf(),
		"empty group":  AnyCombinationOf(AllOf()),
	} {
		if _, err := bad.waitProto(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
