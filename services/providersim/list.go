package providersim

import "net/http"

// list is Stripe's list object.
type list struct {
	Object  string `json:"object"`
	Data    []any  `json:"data"`
	HasMore bool   `json:"has_more"`
	URL     string `json:"url"`
}

// listWindow reads limit (1..100, default 10), starting_after and
// ending_before, and the created window.
type listWindow struct {
	limit         int
	startingAfter string
	endingBefore  string
	lo, hi        int64
}

func readListWindow(f formValues) (listWindow, *apiError) {
	w := listWindow{limit: 10}
	if n, ok, e := f.int("limit"); e != nil {
		return w, e
	} else if ok {
		if n < 1 || n > 100 {
			return w, invalidRequest("parameter_invalid_integer", "limit", "Invalid limit: must be between 1 and 100")
		}
		w.limit = int(n)
	}
	w.startingAfter, _ = f.get("starting_after")
	w.endingBefore, _ = f.get("ending_before")
	if w.startingAfter != "" && w.endingBefore != "" {
		return w, invalidRequest("", "ending_before", "You may only specify one of these parameters: starting_after, ending_before.")
	}
	var e *apiError
	w.lo, w.hi, e = f.createdRange()
	return w, e
}

// paginate returns one page of items, newest first (descending seq, which
// is creation order), as Stripe lists do. starting_after moves to older
// objects, ending_before to newer ones; since a cursor is a position in a
// fixed order, paging through a window returns every object in it exactly
// once even while new objects are created. cursor resolves an id to its
// seq; an unknown cursor id is a 400 resource_missing.
func paginate[T any](items []T, w listWindow, seq func(T) int64, created func(T) int64, keep func(T) bool,
	cursor func(id string) (int64, bool), render func(T) any, url string) (list, *apiError) {
	out := list{Object: "list", Data: []any{}, URL: url}
	match := func(it T) bool {
		c := created(it)
		return c >= w.lo && c <= w.hi && (keep == nil || keep(it))
	}
	switch {
	case w.endingBefore != "":
		after, ok := cursor(w.endingBefore)
		if !ok {
			return out, &apiError{Status: http.StatusBadRequest, Type: errTypeInvalidRequest, Code: "resource_missing",
				Param: "ending_before", Message: "No such object: '" + w.endingBefore + "'"}
		}
		// Walk upward from the cursor, take the limit nearest to it, then
		// present them newest first.
		var picked []T
		for _, it := range items {
			if seq(it) <= after || !match(it) {
				continue
			}
			if len(picked) == w.limit {
				out.HasMore = true
				break
			}
			picked = append(picked, it)
		}
		for i := len(picked) - 1; i >= 0; i-- {
			out.Data = append(out.Data, render(picked[i]))
		}
		return out, nil
	default:
		before := int64(1 << 62)
		if w.startingAfter != "" {
			var ok bool
			if before, ok = cursor(w.startingAfter); !ok {
				return out, &apiError{Status: http.StatusBadRequest, Type: errTypeInvalidRequest, Code: "resource_missing",
					Param: "starting_after", Message: "No such object: '" + w.startingAfter + "'"}
			}
		}
		for i := len(items) - 1; i >= 0; i-- {
			it := items[i]
			if seq(it) >= before || !match(it) {
				continue
			}
			if len(out.Data) == w.limit {
				out.HasMore = true
				break
			}
			out.Data = append(out.Data, render(it))
		}
		return out, nil
	}
}
