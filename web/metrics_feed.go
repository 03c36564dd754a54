package web

import (
	"context"
	"time"

	"github.com/ipledger/ipledger/feed"
	"github.com/ipledger/ipledger/webhook"
	"github.com/prometheus/client_golang/prometheus"
)

// Change feed and webhook metrics (docs/feed.md): the feed's lag behind
// the committed events, webhook attempts by outcome, and each webhook's
// queue depth.
var (
	feedLagEventsDesc = prometheus.NewDesc("ipledger_feed_lag_events",
		"Committed audit events the feed's sequencer has not numbered yet.", nil, nil)
	feedLagSecondsDesc = prometheus.NewDesc("ipledger_feed_lag_seconds",
		"Age of the oldest committed audit event without a revision (0 when none).", nil, nil)
	feedHeadDesc = prometheus.NewDesc("ipledger_feed_head_revision",
		"The highest revision readers can see.", nil, nil)
	webhookQueueDesc = prometheus.NewDesc("ipledger_webhook_queue_depth",
		"Pending deliveries per webhook.", []string{"webhook"}, nil)
)

type feedMetrics struct {
	deliveries *prometheus.CounterVec
	passes     prometheus.Histogram
}

func registerFeedMetrics(reg *prometheus.Registry, fd *feed.Feed, wh *webhook.Service) {
	m := &feedMetrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ipledger_webhook_deliveries_total",
			Help: "Webhook delivery attempts by outcome: delivered (2xx), retry (failed, retried later), failed (failed after 24 h).",
		}, []string{"outcome"}),
		passes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ipledger_feed_pass_events",
			Help:    "Events numbered by one sequencer pass of this process.",
			Buckets: []float64{0, 1, 4, 16, 64, 256, 1000},
		}),
	}
	for _, o := range []string{"delivered", "retry", "failed"} {
		m.deliveries.WithLabelValues(o)
	}
	wh.SetOnDelivery(func(outcome string) { m.deliveries.WithLabelValues(outcome).Inc() })
	fd.SetOnPass(func(n int) { m.passes.Observe(float64(n)) })
	reg.MustRegister(m.deliveries, m.passes, &feedCollector{feed: fd, webhooks: wh})
}

type feedCollector struct {
	feed     *feed.Feed
	webhooks *webhook.Service
}

func (c *feedCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- feedLagEventsDesc
	ch <- feedLagSecondsDesc
	ch <- feedHeadDesc
	ch <- webhookQueueDesc
}

func (c *feedCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if n, age, err := c.feed.Lag(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(feedLagEventsDesc, prometheus.GaugeValue, float64(n))
		ch <- prometheus.MustNewConstMetric(feedLagSecondsDesc, prometheus.GaugeValue, age.Seconds())
	}
	if h, err := c.feed.FeedHead(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(feedHeadDesc, prometheus.GaugeValue, float64(h))
	}
	if qs, err := c.webhooks.WebhookQueues(ctx); err == nil {
		for _, q := range qs {
			ch <- prometheus.MustNewConstMetric(webhookQueueDesc, prometheus.GaugeValue, float64(q.Pending), q.Name)
		}
	}
}
