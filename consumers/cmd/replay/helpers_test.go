package main

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
)

type (
	kadmListed         = kadm.ListedOffset
	kadmOffsetResponse = kadm.OffsetResponse
)

func sortStrings(s []string) []string { sort.Strings(s); return s }
