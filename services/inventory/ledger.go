package inventory

import "fmt"

// Buckets is one SKU's stock split by bucket.
type Buckets struct {
	Available, Reserved, Committed int64
}

// bucket returns the field a Move names; Move's names are a fixed set.
func (b *Buckets) bucket(name string) *int64 {
	switch name {
	case "available":
		return &b.Available
	case "reserved":
		return &b.Reserved
	case "committed":
		return &b.Committed
	}
	return nil
}

// Ledger is the stock of the SKUs a batch of saga events touches, as read
// (and locked) at the start of the batch. The batch's reservations,
// commits and releases are decided against it one after another, in event
// order, so each sees the stock the previous ones left; the caller then
// writes the difference. A SKU missing from the ledger has no stock.
type Ledger map[string]Buckets

// Reserve moves every line's quantity from available to reserved, or none
// of them: when any line lacks stock it changes nothing and returns the
// SKUs that lack it, in line order. Lines must be normalized (see
// Normalize). Available never goes negative.
func (l Ledger) Reserve(lines []Line) (short []string) {
	for _, ln := range lines {
		if b, ok := l[ln.SKU]; !ok || b.Available < ln.Quantity {
			short = append(short, ln.SKU)
		}
	}
	if len(short) > 0 {
		return short
	}
	for _, ln := range lines {
		b := l[ln.SKU]
		b.Available -= ln.Quantity
		b.Reserved += ln.Quantity
		l[ln.SKU] = b
	}
	return nil
}

// Move moves every line's quantity from bucket m.From to m.To (a
// transition decided by Decide). A line whose SKU is missing or whose
// source bucket holds less than its quantity means the reservation and
// the stock disagree; Move then changes nothing and returns an error.
func (l Ledger) Move(lines []Line, m Move) error {
	for _, ln := range lines {
		b, ok := l[ln.SKU]
		if !ok {
			return fmt.Errorf("move %d of %s %s → %s: no such SKU", ln.Quantity, ln.SKU, m.From, m.To)
		}
		from, to := b.bucket(m.From), b.bucket(m.To)
		if from == nil || to == nil || from == to {
			return fmt.Errorf("move %d of %s: bad move %s → %s", ln.Quantity, ln.SKU, m.From, m.To)
		}
		if *from < ln.Quantity {
			return fmt.Errorf("move %d of %s %s → %s: only %d %s", ln.Quantity, ln.SKU, m.From, m.To, *from, m.From)
		}
	}
	for _, ln := range lines {
		b := l[ln.SKU]
		*b.bucket(m.From) -= ln.Quantity
		*b.bucket(m.To) += ln.Quantity
		l[ln.SKU] = b
	}
	return nil
}
