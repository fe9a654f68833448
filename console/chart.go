package console

import (
	"fmt"
	"strings"
)

// Charts are SVG drawn here and written into the page by html/template (see
// the package doc for why not a JavaScript library). Every coordinate is a
// number formatted by this file and every label goes through the template's
// escaping, so no data reaches the SVG as markup. Colours and fonts come
// from the stylesheet (classes), since the CSP allows no inline style.

const (
	chartW, chartH                 = 960, 220
	padL, padR, padT, padB         = 56, 12, 12, 28
	plotW, plotH                   = chartW - padL - padR, chartH - padT - padB
	maxXLabels                     = 12
	barGapRatio            float64 = 0.2
)

type chart struct {
	Width, Height int
	Series        []chartSeries
	Bars          []chartBar // bar charts: one series
	XLabels       []chartLabel
	YLabels       []chartLabel
	Axis          string // the x axis line's points
}

type chartSeries struct {
	Name, Class string
	Points      string // polyline points
	Total       int64
}

type chartBar struct {
	X, Y, W, H string
	Title      string
}

type chartLabel struct {
	X, Y string
	Text string
}

func num(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", f), "0"), ".")
}

// lineChart draws one polyline per series over len(labels) x positions.
func lineChart(labels []string, series []chartSeries, values [][]int64) *chart {
	c := &chart{Width: chartW, Height: chartH}
	var top int64 = 1
	for _, vs := range values {
		for _, v := range vs {
			top = max(top, v)
		}
	}
	top = niceCeil(top)
	n := len(labels)
	x := func(i int) float64 {
		if n <= 1 {
			return padL
		}
		return padL + float64(i)*plotW/float64(n-1)
	}
	y := func(v int64) float64 { return padT + plotH - float64(v)*plotH/float64(top) }
	for si, s := range series {
		var b strings.Builder
		for i, v := range values[si] {
			fmt.Fprintf(&b, "%s,%s ", num(x(i)), num(y(v)))
			s.Total += v
		}
		s.Points = strings.TrimSpace(b.String())
		c.Series = append(c.Series, s)
	}
	c.axes(labels, top, x, func(v int64) string { return fmt.Sprint(v) })
	return c
}

// barChart draws one bar per label.
// yText writes the y axis' values (e.g. micro-units as quantities).
func barChart(labels []string, values []int64, titles []string, yText func(int64) string) *chart {
	c := &chart{Width: chartW, Height: chartH}
	var top int64 = 1
	for _, v := range values {
		top = max(top, v)
	}
	top = niceCeil(top)
	n := max(len(labels), 1)
	slot := float64(plotW) / float64(n)
	for i, v := range values {
		h := float64(max(v, 0)) * plotH / float64(top)
		c.Bars = append(c.Bars, chartBar{X: num(padL + float64(i)*slot + slot*barGapRatio/2), Y: num(padT + plotH - h),
			W: num(slot * (1 - barGapRatio)), H: num(h), Title: titles[i]})
	}
	c.axes(labels, top, func(i int) float64 { return padL + (float64(i)+0.5)*slot }, yText)
	return c
}

func (c *chart) axes(labels []string, top int64, x func(int) float64, yText func(int64) string) {
	c.Axis = fmt.Sprintf("%d,%d %d,%d", padL, padT+plotH, padL+plotW, padT+plotH)
	step := max(1, (len(labels)+maxXLabels-1)/maxXLabels)
	for i := 0; i < len(labels); i += step {
		c.XLabels = append(c.XLabels, chartLabel{X: num(x(i)), Y: num(chartH - 8), Text: labels[i]})
	}
	for _, v := range []int64{0, top / 2, top} {
		c.YLabels = append(c.YLabels, chartLabel{X: num(padL - 6), Y: num(padT + plotH - float64(v)*plotH/float64(top) + 4), Text: yText(v)})
	}
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v int64) int64 {
	p := int64(1)
	for {
		for _, m := range []int64{1, 2, 5} {
			if m*p >= v {
				return m * p
			}
		}
		p *= 10
	}
}
