package diagnosis

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
)

// A ring stores each point as what changed since the point before it: the
// bits of every value XORed with what the points before predict, leading
// and trailing zero bytes dropped. A bucket is predicted by its value in the
// point before, a scalar by the point before moved by the step before it:
// a running sum that grows at a steady rate (a constant gauge's, every
// gauge's count of observations, an idle model's or one of steady traffic)
// is predicted exactly and keeps nothing but its bit. A point is 304 bytes
// and its histograms 8 bytes a bucket as a struct; cumulative counts and
// sums that move a little keep 2 to 4 bytes of each value that moved off
// its prediction and a bit of each that did not (an idle model's point is
// a byte). XOR is exact both ways and the prediction is computed alike on
// both, so a decoded point is bit for bit the point stored
// (TestRingMatchesReference).

// numScalars are a point's values besides its time and histograms: the
// gauges' sums, squares and counts, then the counters.
const numScalars = 3*numGauges + numCounters

// scalarsOf returns p's scalars as bits, in the order numScalars counts them.
func scalarsOf(p *point) (s [numScalars]uint64) {
	for i := range numGauges {
		s[i] = math.Float64bits(p.gsum[i])
		s[numGauges+i] = math.Float64bits(p.gsq[i])
		s[2*numGauges+i] = math.Float64bits(p.gn[i])
	}
	for i := range numCounters {
		s[3*numGauges+i] = math.Float64bits(p.c[i])
	}
	return s
}

// setScalars sets p's scalars from their bits.
func setScalars(p *point, s *[numScalars]uint64) {
	for i := range numGauges {
		p.gsum[i] = math.Float64frombits(s[i])
		p.gsq[i] = math.Float64frombits(s[numGauges+i])
		p.gn[i] = math.Float64frombits(s[2*numGauges+i])
	}
	for i := range numCounters {
		p.c[i] = math.Float64frombits(s[3*numGauges+i])
	}
}

// moves are each scalar's move from one point to the next, by which the
// next is predicted: zero before the second point, NaN where not finite.
type moves [numScalars]float64

// predict returns the bits the scalars after last are encoded against:
// last moved by step, or last where that is not finite.
func predict(last *[numScalars]uint64, step *moves) (q [numScalars]uint64) {
	for i, b := range last {
		q[i] = b
		// additions only, which Go never fuses: encoder and decoder round alike
		if v := math.Float64frombits(b) + step[i]; !math.IsNaN(v) && !math.IsInf(v, 0) {
			q[i] = math.Float64bits(v)
		}
	}
	return q
}

// to sets step to the move from the scalars old to those of p, the
// point at index k of its ring (the first has no step before it).
func (step *moves) to(old *[numScalars]uint64, p *point, k int) {
	if k == 0 {
		*step = moves{}
		return
	}
	cur := scalarsOf(p)
	for i := range cur {
		step[i] = math.Float64frombits(cur[i]) - math.Float64frombits(old[i])
	}
}

// decodeNext turns p, the point at k-1 of its ring (zero for k = 0) whose
// step is step, into the point src encodes, at k, and step into its step.
func decodeNext(p *point, step *moves, k int, src []byte) {
	old := scalarsOf(p)
	pred := predict(&old, step)
	decodePoint(p, &pred, src)
	step.to(&old, p, k)
}

// cursorState is a point decoded and its step, the start of a later read.
type cursorState struct {
	p    point
	step moves
}

// ring keeps at most one point per slot of res nanoseconds (the newest
// observation in the slot), oldest first, encoded as above.
type ring struct {
	res int64
	pts []int64  // the stored points' times
	off []uint32 // where each point's encoding starts in enc
	enc []byte   // the first point against nothing, each other against the one before
	// hFrom: the points before hFrom[w] read without histogram w (its
	// bounds changed after them); their stored counts still decode the
	// ones after.
	hFrom [numHists]int
	// prev is the point before the newest, decoded (zero when the newest
	// is the first): what the newest is encoded against, and replaced
	// against when a newer observation falls in its slot; prevStep its
	// step.
	prev     point
	prevStep moves
	// cursor is point cursorAt decoded (nil: none), the start of
	// the next read further on: the diagnosis reads the same old points
	// scrape after scrape, and decoding them from the first each time
	// made a scrape five times dearer.
	cursor   *cursorState
	cursorAt int
}

// add records p, replacing the newest point when it falls in the same slot.
func (r *ring) add(p *point) {
	n := len(r.pts)
	if n > 0 && slotOf(p.t, r.res) == slotOf(r.pts[n-1], r.res) {
		if r.cursor != nil && r.cursorAt == n-1 {
			r.cursor = nil
		}
		r.enc = encodePoint(r.enc[:r.off[n-1]], &r.prev, &r.prevStep, p)
		r.pts[n-1] = p.t
		for w := range r.hFrom {
			r.hFrom[w] = min(r.hFrom[w], n-1) // the replaced point's histograms are new
		}
		return
	}
	if n > 0 {
		decodeNext(&r.prev, &r.prevStep, n-1, r.enc[r.off[n-1]:]) // prev becomes the newest
	}
	r.off = append(r.off, uint32(len(r.enc)))
	r.pts = append(r.pts, p.t)
	r.enc = encodePoint(r.enc, &r.prev, &r.prevStep, p)
}

// dropHistogram reads histogram w as absent on every point stored so far.
func (r *ring) dropHistogram(w int) { r.hFrom[w] = len(r.pts) }

// prune drops old points but keeps the newest one at or before cut, so that
// a window starting at cut still has a point to start from.
func (r *ring) prune(cut int64) {
	i := 0
	for i+1 < len(r.pts) && r.pts[i+1] <= cut {
		i++
	}
	if i == 0 {
		return
	}
	// The new first point is encoded again, against nothing, and the
	// second against it alone (the point before it, which predicted it, is
	// gone); the ones after keep their bytes.
	var first, second point
	var step moves
	r.decodeStep(&first, &step, i)
	abs := encodePoint(nil, &point{}, &moves{}, &first)
	secondAt, restAt := uint32(len(abs)), len(r.enc)
	if i+1 < len(r.pts) {
		if i+2 < len(r.pts) {
			restAt = int(r.off[i+2])
		}
		copyPoint(&second, &first)
		decodeNext(&second, &step, i+1, r.enc[r.off[i+1]:])
		abs = encodePoint(abs, &first, &moves{}, &second)
	}
	rest := r.enc[restAt:]
	if len(abs) <= restAt {
		// in place: the bytes move down, over ones already read
		copy(r.enc, abs)
		r.enc = r.enc[:len(abs)+copy(r.enc[len(abs):], rest)]
	} else {
		r.enc = append(abs, rest...)
	}
	r.off = slices.Delete(r.off, 0, i)
	r.off[0] = 0
	if len(r.off) > 1 {
		r.off[1] = secondAt
	}
	for k := 2; k < len(r.off); k++ {
		r.off[k] = uint32(int(r.off[k]) - restAt + len(abs))
	}
	r.pts = slices.Delete(r.pts, 0, i)
	for w := range r.hFrom {
		r.hFrom[w] = max(0, r.hFrom[w]-i)
	}
	switch len(r.pts) {
	case 1:
		r.prev, r.prevStep = point{}, moves{}
	case 2:
		r.prevStep = moves{} // prev is the first now
	}
	// a cursor at the new first point would carry the step of a point gone
	if r.cursorAt -= i; r.cursorAt <= 0 {
		r.cursor = nil
	}
}

// decodeTo sets p to the stored state of point i, decoded from the first
// (or from prev, for the newest two), without the hFrom mask.
func (r *ring) decodeTo(p *point, i int) {
	var step moves
	r.decodeStep(p, &step, i)
}

// decodeStep is decodeTo that also sets step to point i's.
func (r *ring) decodeStep(p *point, step *moves, i int) {
	n := len(r.pts)
	switch {
	case n >= 2 && i >= n-2:
		copyPoint(p, &r.prev)
		*step = r.prevStep
		if i == n-1 {
			decodeNext(p, step, i, r.enc[r.off[i]:])
		}
	default:
		k := 0
		if r.cursor != nil && r.cursorAt <= i {
			copyPoint(p, &r.cursor.p)
			*step = r.cursor.step
			k = r.cursorAt + 1
		} else {
			*p, *step = point{}, moves{}
		}
		for ; k <= i; k++ {
			decodeNext(p, step, k, r.enc[r.off[k]:])
		}
		if i > 2 && (r.cursor == nil || r.cursorAt <= i) {
			if r.cursor == nil {
				r.cursor = new(cursorState)
			}
			copyPoint(&r.cursor.p, p)
			r.cursor.step = *step
			r.cursorAt = i
		}
	}
	p.t = r.pts[i]
}

// copyPoint sets dst to src, with bucket slices of dst's own.
func copyPoint(dst, src *point) {
	h := dst.h
	*dst = *src
	for w := range h {
		dst.h[w] = nil
		if src.h[w] != nil {
			b := h[w][:0]
			if b == nil {
				b = make([]float64, 0, len(src.h[w]))
			}
			dst.h[w] = append(b, src.h[w]...)
		}
	}
}

// at returns point i as it was added (histograms whose bounds changed
// since read as absent), in memory of its own.
func (r *ring) at(i int) *point {
	p := new(point)
	r.decodeTo(p, i)
	for w := range p.h {
		if i < r.hFrom[w] {
			p.h[w] = nil
		}
	}
	return p
}

// newest returns the newest point, nil if none.
func (r *ring) newest() *point {
	if len(r.pts) == 0 {
		return nil
	}
	return r.at(len(r.pts) - 1)
}

// points returns every point, oldest first.
func (r *ring) points() []point {
	out := make([]point, len(r.pts))
	var p point
	var step moves
	for i := range out {
		decodeNext(&p, &step, i, r.enc[r.off[i]:])
		out[i] = p
		for w := range p.h {
			out[i].h[w] = nil
			if i >= r.hFrom[w] {
				out[i].h[w] = slices.Clone(p.h[w])
			}
		}
		out[i].t = r.pts[i]
	}
	return out
}

// atOrBefore returns the newest point with t <= cut, or nil.
func (r *ring) atOrBefore(cut int64) *point {
	for i, t := range slices.Backward(r.pts) {
		if t <= cut {
			return r.at(i)
		}
	}
	return nil
}

// atOrAfter returns the oldest point at or after cut, nil if none.
func (r *ring) atOrAfter(cut int64) *point {
	for i, t := range r.pts {
		if t >= cut {
			return r.at(i)
		}
	}
	return nil
}

// An encoded point is a header byte (bit w: histogram w present; bit
// scalarsSame: every scalar as predicted; bit histsSame: every present
// histogram as in the point before), then unless scalarsSame the scalars
// as a vector against their prediction, then unless histsSame each present
// histogram as its length (uvarint) and a vector, against the previous
// point's when that has as many buckets, else against zeros. A vector is a
// bitmap of the values that changed and, for each, a byte (leading zero
// bytes << 4 | bytes kept) and the bytes kept of the XOR, least
// significant first.
const (
	scalarsSame = 1 << numHists
	histsSame   = 1 << (numHists + 1)
)

// sameHistograms reports whether every histogram of p is ref's, bit for bit.
func sameHistograms(ref, p *point) bool {
	for w, h := range p.h {
		if h == nil {
			continue
		}
		if len(ref.h[w]) != len(h) || ref.h[w] == nil {
			return false
		}
		for i, v := range h {
			if math.Float64bits(v) != math.Float64bits(ref.h[w][i]) {
				return false
			}
		}
	}
	return true
}

// encodePoint appends p encoded against ref, the point before it, whose
// step is refStep, to dst.
func encodePoint(dst []byte, ref *point, refStep *moves, p *point) []byte {
	hdr := len(dst)
	dst = append(dst, 0)
	last, b := scalarsOf(ref), scalarsOf(p)
	a := predict(&last, refStep)
	if a == b {
		dst[hdr] |= scalarsSame
	} else {
		dst = encodeVector(dst, a[:], b[:])
	}
	same := sameHistograms(ref, p)
	if same {
		dst[hdr] |= histsSame
	}
	for w, h := range p.h {
		if h == nil {
			continue
		}
		dst[hdr] |= 1 << w
		if same {
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(len(h)))
		var base []float64 // zeros
		if ref.h[w] != nil && len(ref.h[w]) == len(h) {
			base = ref.h[w]
		}
		dst = encodeFloats(dst, base, h)
	}
	return dst
}

// decodePoint turns p, the point before src's, into the point src encodes
// (its time aside) against pred, its scalars' prediction, reusing p's
// bucket slices.
func decodePoint(p *point, pred *[numScalars]uint64, src []byte) {
	hdr := src[0]
	src = src[1:]
	s := *pred
	if hdr&scalarsSame == 0 {
		src = decodeVector(s[:], src)
	}
	setScalars(p, &s)
	for w := range p.h {
		if hdr&(1<<w) == 0 {
			p.h[w] = nil
			continue
		}
		if hdr&histsSame != 0 {
			continue // p's, as before
		}
		n, k := binary.Uvarint(src)
		src = src[k:]
		h := p.h[w]
		if h == nil || len(h) != int(n) {
			h = make([]float64, n) // encoded against zeros
		}
		src = decodeFloats(h, src)
		p.h[w] = h
	}
}

// encodeVector appends cur encoded against base (of the same length).
func encodeVector(dst []byte, base, cur []uint64) []byte {
	bm := len(dst)
	dst = append(dst, make([]byte, (len(cur)+7)/8)...)
	for i := range cur {
		if x := base[i] ^ cur[i]; x != 0 {
			dst[bm+i/8] |= 1 << (i % 8)
			dst = appendXOR(dst, x)
		}
	}
	return dst
}

// encodeFloats is encodeVector of the values' bits; a nil base is zeros.
func encodeFloats(dst []byte, base, cur []float64) []byte {
	bm := len(dst)
	dst = append(dst, make([]byte, (len(cur)+7)/8)...)
	for i, v := range cur {
		x := math.Float64bits(v)
		if base != nil {
			x ^= math.Float64bits(base[i])
		}
		if x != 0 {
			dst[bm+i/8] |= 1 << (i % 8)
			dst = appendXOR(dst, x)
		}
	}
	return dst
}

// appendXOR appends a non-zero x as a byte (leading zero bytes << 4 |
// bytes kept) and the bytes between its leading and trailing zero bytes,
// least significant first.
func appendXOR(dst []byte, x uint64) []byte {
	lead, trail := bits.LeadingZeros64(x)/8, bits.TrailingZeros64(x)/8
	n := 8 - lead - trail
	dst = append(dst, byte(lead<<4|n))
	x >>= 8 * trail
	for range n {
		dst = append(dst, byte(x))
		x >>= 8
	}
	return dst
}

// readXOR reads what appendXOR wrote and returns it and the rest of src.
func readXOR(src []byte) (uint64, []byte) {
	lead, n := int(src[0]>>4), int(src[0]&0xf)
	if len(src) >= 9 {
		// one load of 8 bytes, those past the value masked off
		x := binary.LittleEndian.Uint64(src[1:9]) & (1<<(8*n) - 1)
		return x << (8 * (8 - lead - n)), src[1+n:]
	}
	var x uint64
	for k := range n {
		x |= uint64(src[1+k]) << (8 * k)
	}
	return x << (8 * (8 - lead - n)), src[1+n:]
}

// decodeVector XORs into v what encodeVector wrote and returns the rest
// of src.
func decodeVector(v []uint64, src []byte) []byte {
	bm := src[:(len(v)+7)/8]
	src = src[len(bm):]
	for b, m := range bm {
		for ; m != 0; m &= m - 1 {
			var x uint64
			x, src = readXOR(src)
			v[b*8+bits.TrailingZeros8(m)] ^= x
		}
	}
	return src
}

// decodeFloats is decodeVector of the values' bits. Both walk the bitmap
// a byte at a time and its set bits only, without a callback, and readXOR
// loads a value's bytes at once: decoding the coarse ring is nine tenths
// of the baseline's dispersion, and this took
// BenchmarkBaselineStats/with-dispersion from 44 to 31 µs (-29 %).
func decodeFloats(v []float64, src []byte) []byte {
	bm := src[:(len(v)+7)/8]
	src = src[len(bm):]
	for b, m := range bm {
		for ; m != 0; m &= m - 1 {
			var x uint64
			x, src = readXOR(src)
			i := b*8 + bits.TrailingZeros8(m)
			v[i] = math.Float64frombits(math.Float64bits(v[i]) ^ x)
		}
	}
	return src
}

// walker reads a ring's points oldest first, decoding each once.
type walker struct {
	r    *ring
	at   int   // the point cur holds; -1 before the first
	cur  point // as stored, without the hFrom mask
	step moves // cur's
	out  [2]point
	flip int
	last *point // returned last, for point at
}

// walk returns a walker at the ring's start.
func (r *ring) walk() *walker { return &walker{r: r, at: -1} }

// atOrBefore returns the newest point at or before cut that is not older
// than the one it returned last, nil if none. The point is the walker's:
// it stays as it is until the walker returns two other points.
func (w *walker) atOrBefore(cut int64) *point {
	r := w.r
	i := max(w.at, 0)
	for i+1 < len(r.pts) && r.pts[i+1] <= cut {
		i++
	}
	if i >= len(r.pts) || r.pts[i] > cut {
		return nil
	}
	if i == w.at && w.last != nil {
		return w.last
	}
	w.to(i)
	p := &w.out[w.flip]
	w.flip ^= 1
	copyPoint(p, &w.cur)
	p.t = r.pts[i]
	for h := range p.h {
		if i < r.hFrom[h] {
			p.h[h] = nil
		}
	}
	w.last = p
	return p
}

// walkFrom returns a walker that starts at the ring's cursor when that
// is at or before point i, else at the ring's start.
func (r *ring) walkFrom(i int) *walker {
	w := r.walk()
	if c := r.cursor; c != nil && r.cursorAt <= i {
		copyPoint(&w.cur, &c.p)
		w.at, w.step = r.cursorAt, c.step
	}
	return w
}

// to decodes the points up to i, at or after the one the walker holds,
// and returns point i as stored (without the hFrom mask): the walker's
// own, until it moves on.
func (w *walker) to(i int) *point {
	for w.at < i {
		w.at++
		decodeNext(&w.cur, &w.step, w.at, w.r.enc[w.r.off[w.at]:])
	}
	w.cur.t = w.r.pts[i]
	return &w.cur
}
