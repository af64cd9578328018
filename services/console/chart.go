package console

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"
)

// Charts are drawn on the server as inline SVG: no script, no build step,
// and a page is complete as soon as its HTML arrives.

var palette = []string{"#2563eb", "#16a34a", "#dc2626", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563"}

// Series is one line of a line chart or one colour of a stacked bar chart.
type Series struct {
	Name   string
	Values []float64 // one per label
}

const (
	chartW, chartH = 640, 180
	padL, padR     = 44, 10
	padT, padB     = 10, 34
)

func esc(s string) string { return template.HTMLEscapeString(s) }

// niceMax rounds v up to 1, 2 or 5 times a power of ten, so the axis reads well.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func fmtNum(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func frame(b *strings.Builder, title string, max float64, labels []string, every int) {
	fmt.Fprintf(b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s"><title>%s</title>`, chartW, chartH, esc(title), esc(title))
	plotH := float64(chartH - padT - padB)
	for i := 0; i <= 4; i++ {
		y := float64(padT) + plotH*float64(i)/4
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" class="grid"/>`, padL, chartW-padR, y, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" class="axis" text-anchor="end">%s</text>`, padL-4, y+4, fmtNum(max*float64(4-i)/4))
	}
	plotW := float64(chartW - padL - padR)
	for i, l := range labels {
		if every > 0 && i%every != 0 {
			continue
		}
		x := float64(padL) + plotW*(float64(i)+0.5)/float64(len(labels))
		fmt.Fprintf(b, `<text x="%.1f" y="%d" class="axis" text-anchor="middle">%s</text>`, x, chartH-padB+14, esc(l))
	}
}

func legend(b *strings.Builder, series []Series) {
	x := padL
	for i, s := range series {
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" class="legend">%s</text>`,
			x, chartH-12, palette[i%len(palette)], x+14, chartH-3, esc(s.Name))
		x += 24 + 7*len(s.Name)
	}
}

func labelEvery(n int) int {
	if n <= 12 {
		return 1
	}
	return (n + 11) / 12
}

// LineChart draws one line per series over the labels.
func LineChart(title string, labels []string, series []Series) template.HTML {
	var b strings.Builder
	max := 0.0
	for _, s := range series {
		for _, v := range s.Values {
			max = math.Max(max, v)
		}
	}
	max = niceMax(max)
	frame(&b, title, max, labels, labelEvery(len(labels)))
	plotW, plotH := float64(chartW-padL-padR), float64(chartH-padT-padB)
	for i, s := range series {
		var pts []string
		for j, v := range s.Values {
			x := float64(padL) + plotW*(float64(j)+0.5)/float64(max1(len(labels)))
			y := float64(padT) + plotH*(1-v/max)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"><title>%s</title></polyline>`,
			palette[i%len(palette)], strings.Join(pts, " "), esc(s.Name))
	}
	legend(&b, series)
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every text in it is escaped above
}

// BarChart draws stacked bars, one bar per label, one colour per series.
func BarChart(title string, labels []string, series []Series) template.HTML {
	var b strings.Builder
	max := 0.0
	for j := range labels {
		sum := 0.0
		for _, s := range series {
			sum += s.Values[j]
		}
		max = math.Max(max, sum)
	}
	max = niceMax(max)
	frame(&b, title, max, labels, labelEvery(len(labels)))
	plotW, plotH := float64(chartW-padL-padR), float64(chartH-padT-padB)
	bw := plotW / float64(max1(len(labels)))
	for j, l := range labels {
		base := 0.0
		for i, s := range series {
			v := s.Values[j]
			if v <= 0 {
				continue
			}
			y := float64(padT) + plotH*(1-(base+v)/max)
			h := plotH * v / max
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s</title></rect>`,
				float64(padL)+bw*float64(j)+bw*0.1, y, bw*0.8, h, palette[i%len(palette)], esc(l), esc(s.Name), fmtNum(v))
			base += v
		}
	}
	legend(&b, series)
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every text in it is escaped above
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

// Hop is one point of a timeline: something that happened at At.
type Hop struct {
	At    time.Time
	Label string
	Lane  string // the service it happened in
}

// TimelineChart draws the hops on a time axis, one lane per service, with
// the time since the previous hop written on each connector.
func TimelineChart(hops []Hop) template.HTML {
	if len(hops) == 0 {
		return ""
	}
	var lanes []string
	laneOf := map[string]int{}
	for _, h := range hops {
		if _, ok := laneOf[h.Lane]; !ok {
			laneOf[h.Lane] = len(lanes)
			lanes = append(lanes, h.Lane)
		}
	}
	first, last := hops[0].At, hops[len(hops)-1].At
	span := last.Sub(first).Seconds()
	if span <= 0 {
		span = 1
	}
	const left, right, laneH, top = 110, 20, 34, 20
	w := 900
	h := top + laneH*len(lanes) + 30
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="timeline" viewBox="0 0 %d %d" role="img" aria-label="timeline"><title>time between hops</title>`, w, h)
	for i, l := range lanes {
		y := top + laneH*i + laneH/2
		fmt.Fprintf(&b, `<text x="4" y="%d" class="lane">%s</text><line x1="%d" x2="%d" y1="%d" y2="%d" class="grid"/>`,
			y+4, esc(l), left, w-right, y, y)
	}
	x := func(t time.Time) float64 {
		return left + float64(w-left-right)*t.Sub(first).Seconds()/span
	}
	y := func(hp Hop) int { return top + laneH*laneOf[hp.Lane] + laneH/2 }
	for i, hp := range hops {
		if i > 0 {
			prev := hops[i-1]
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" class="hop"><title>%s</title></line>`,
				x(prev.At), y(prev), x(hp.At), y(hp), esc("+"+FormatDuration(hp.At.Sub(prev.At))))
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%d" r="5" fill="%s"><title>%s</title></circle>`,
			x(hp.At), y(hp), palette[laneOf[hp.Lane]%len(palette)], esc(hp.Label+" at "+hp.At.UTC().Format("15:04:05.000")))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" class="axis">0</text><text x="%d" y="%d" class="axis" text-anchor="end">+%s</text>`,
		left, h-6, w-right, h-6, esc(FormatDuration(last.Sub(first))))
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every text in it is escaped above
}

// FormatDuration prints a duration the way an operator reads it: 850ms,
// 3.2s, 4m10s, 2h5m.
func FormatDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + FormatDuration(-d)
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}
