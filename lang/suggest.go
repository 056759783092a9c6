package lang

import (
	"slices"

	"github.com/agext/levenshtein"
)

// Suggest returns the name among candidates closest to given, for a "Did
// you mean" hint, or "" when none is close: within an edit distance of
// two, and of half given's length, so that a short name is not matched to
// anything at all. Ties go to the name first in sorted order. It measures
// as HCL does for misspelt arguments.
func Suggest(given string, candidates []string) string {
	best, bestDist := "", 0
	for _, c := range slices.Sorted(slices.Values(candidates)) {
		d := levenshtein.Distance(given, c, nil)
		if d == 0 || d > 2 || d > len(given)/2 {
			continue
		}
		if best == "" || d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// didYouMean is the sentence that ends a diagnostic's detail when name is
// close to one of candidates (rendered by render), or "".
func didYouMean(name string, candidates []string, render func(string) string) string {
	if s := Suggest(name, candidates); s != "" {
		return " Did you mean " + render(s) + "?"
	}
	return ""
}
