-- hitcount: ready analytics queries, database hitcount.
--
-- Every query runs on ClickHouse 18.16 and newer: no toStartOfInterval, no
-- WITH FILL, no window functions, no query parameters; and newer ClickHouse
-- (every joined subquery has an alias). Edit the literals
-- (site, page, time range) in place. Each query follows a line
--   -- name: <title>
-- (tools and deploy/queries_test.go split the file on those lines).
--
--   clickhouse-client --user analyst --ask-password --database hitcount --multiquery < queries.sql
--
-- Times are DateTime in the server's time zone. The rollups (hits_1m, hits_1d)
-- are SummingMergeTree: always sum(hits), never count(), since rows of the
-- same key are merged in the background.

-- name: top pages, last 24 hours
-- From the per-minute rollup: cheap whatever the traffic.
SELECT site, path, sum(hits) AS page_hits, sum(bytes) AS page_bytes
FROM hitcount.hits_1m
WHERE minute >= now() - INTERVAL 1 DAY
GROUP BY site, path
ORDER BY page_hits DESC, site, path
LIMIT 50;

-- name: hourly series for one page, last 7 days
-- Every hour of the range, with 0 where there were no hits (18.16 has no
-- WITH FILL, so the hours come from system.numbers).
SELECT hour, page_hits, bot_hits
FROM
(
    SELECT toStartOfHour(now()) - number * 3600 AS hour
    FROM system.numbers
    LIMIT 168
) AS hours
ANY LEFT JOIN
(
    SELECT toStartOfHour(minute) AS hour, sum(hits) AS page_hits, sumIf(hits, bot = 1) AS bot_hits
    FROM hitcount.hits_1m
    WHERE site = 'www.example.com' AND path = '/pricing'
      AND minute >= toStartOfHour(now()) - 167 * 3600
    GROUP BY hour
) AS series USING hour
ORDER BY hour;

-- name: status mix per site, last 24 hours
-- Status classes (2xx, 3xx, 4xx, 5xx) with their share of the site's hits.
SELECT site, status_class, class_hits, round(100 * class_hits / site_hits, 2) AS pct
FROM
(
    SELECT site, concat(toString(intDiv(status, 100)), 'xx') AS status_class, sum(hits) AS class_hits
    FROM hitcount.hits_1m
    WHERE minute >= now() - INTERVAL 1 DAY
    GROUP BY site, status_class
) AS classes
ANY LEFT JOIN
(
    SELECT site, sum(hits) AS site_hits
    FROM hitcount.hits_1m
    WHERE minute >= now() - INTERVAL 1 DAY
    GROUP BY site
) AS totals USING site
ORDER BY site, status_class;

-- name: bots vs humans, last 24 hours
-- bot is set at ingest from the user agent (sink.BotPattern).
SELECT
    site,
    sumIf(hits, bot = 0) AS human_hits,
    sumIf(hits, bot = 1) AS bot_hits,
    round(100 * bot_hits / (human_hits + bot_hits), 2) AS bot_pct
FROM hitcount.hits_1m
WHERE minute >= now() - INTERVAL 1 DAY
GROUP BY site
ORDER BY site;

-- name: top referers, last 24 hours
-- Referring domains other than the site itself, from the raw hits.
SELECT site, domain(referer) AS referer_domain, count() AS referred_hits, uniq(path) AS pages
FROM hitcount.hits
WHERE ts >= now() - INTERVAL 1 DAY
  AND referer != ''
  AND domain(referer) != site
  AND domain(referer) != host
GROUP BY site, referer_domain
ORDER BY referred_hits DESC
LIMIT 50;

-- name: slowest pages, last 24 hours
-- Needs $request_time in the log format (request_time_us is 0 without it).
-- Pages with at least 10 timed requests, by average time.
SELECT
    site,
    path,
    count() AS requests,
    round(avg(request_time_us) / 1000, 1) AS avg_ms,
    round(quantile(0.95)(request_time_us) / 1000, 1) AS p95_ms,
    round(max(request_time_us) / 1000, 1) AS max_ms
FROM hitcount.hits
WHERE ts >= now() - INTERVAL 1 DAY
  AND request_time_us > 0
GROUP BY site, path
HAVING requests >= 10
ORDER BY avg_ms DESC
LIMIT 50;

-- name: crossings history with current state
-- Every crossing once, with its latest state (the highest version wins):
-- detected, claimed, sent or failed. Its kind: '' or threshold, milestones,
-- below, no_traffic (threshold: the silence in seconds, window: the minute
-- after the last hit), no_data (a site's collectors silent since window).
SELECT
    key,
    argMax(rule, version) AS crossing_rule,
    argMax(site, version) AS crossing_site,
    argMax(kind, version) AS crossing_kind,
    argMax(path, version) AS crossing_path,
    argMax(window_start, version) AS crossing_window,
    argMax(threshold, version) AS crossing_threshold,
    argMax(count, version) AS hits_counted,
    argMax(state, version) AS current_state,
    argMax(attempts, version) AS send_attempts,
    argMax(error, version) AS last_error,
    min(updated) AS detected_at,
    max(updated) AS last_change
FROM hitcount.crossings
GROUP BY key
ORDER BY detected_at DESC, key
LIMIT 100;

-- name: ingest progress per file
-- How far each log file is shipped (the offset of its last committed line)
-- and when it was last inserted into; a file whose last insert is old while
-- the web server writes to it is stuck.
SELECT site, file, source_id, last_offset, last_insert_at, now() - last_insert_at AS seconds_since_insert
FROM
(
    SELECT site, source_id, maxMerge(max_offset) AS last_offset, maxMerge(last_insert) AS last_insert_at
    FROM hitcount.ingest_progress
    GROUP BY site, source_id
) AS progress
ANY LEFT JOIN
(
    SELECT source_id, argMax(path, seen) AS file
    FROM hitcount.sources
    GROUP BY source_id
) AS files USING source_id
ORDER BY last_insert_at DESC, site, file;

-- name: how far each collector has committed, per site and file
-- Below and no_traffic rules evaluate a window only once every file of its
-- site is committed past the window's end plus sweep.lateness (caught_up, the
-- store's clock); a site whose oldest caught_up lags holds them
-- (hitcount_sweeper_rules_held). caught_up 2100-01-01: a file read to its end
-- for good; 1970-01-01: never caught up (a file still being read, or a
-- collector older than this version). The row whose file is the configured
-- globs is the collector's record of the site itself. Records not written for
-- a day are forgotten by the sweeper, and left out here.
SELECT site, collector, argMax(host, seen) AS collector_host, argMax(path, seen) AS file,
    max(caught_up) AS caught_up_at, max(seen) AS last_seen, now() - max(caught_up) AS seconds_behind
FROM hitcount.source_owners
GROUP BY site, source_id, collector
HAVING last_seen >= now() - INTERVAL 1 DAY
ORDER BY site, caught_up_at, file;

-- name: weekly report: largest changes, this week so far against the week before
-- What a report rule reads (alerts/reportstore.go): hits_1d for the server's
-- days wholly inside each week, hits_1m for the day at each end, since a week
-- starts at local midnight in the rule's zone (here Europe/Berlin's Monday),
-- which need not be the server's day. Every minute is in exactly one of the
-- two. A report reads whole weeks; replace now() by the week's end for one.
SELECT path, sumIf(hits, cur = 1) AS this_week, sumIf(hits, cur = 0) AS week_before,
    toInt64(this_week) - toInt64(week_before) AS change
FROM
(
    SELECT path, hits, toUInt8(0) AS cur FROM hitcount.hits_1d
    WHERE site = 'www.example.com'
      AND day > toDate(toDateTime(toString(toMonday(now(), 'Europe/Berlin') - 7) || ' 00:00:00', 'Europe/Berlin'))
      AND day < toDate(toDateTime(toString(toMonday(now(), 'Europe/Berlin')) || ' 00:00:00', 'Europe/Berlin') - 1)
    UNION ALL
    SELECT path, hits, toUInt8(0) AS cur FROM hitcount.hits_1m
    WHERE site = 'www.example.com'
      AND minute >= toDateTime(toString(toMonday(now(), 'Europe/Berlin') - 7) || ' 00:00:00', 'Europe/Berlin') AND minute < toDateTime(toString(toMonday(now(), 'Europe/Berlin')) || ' 00:00:00', 'Europe/Berlin')
      AND (toDate(minute) = toDate(toDateTime(toString(toMonday(now(), 'Europe/Berlin') - 7) || ' 00:00:00', 'Europe/Berlin')) OR toDate(minute) = toDate(toDateTime(toString(toMonday(now(), 'Europe/Berlin')) || ' 00:00:00', 'Europe/Berlin') - 1))
    UNION ALL
    SELECT path, hits, toUInt8(1) AS cur FROM hitcount.hits_1d
    WHERE site = 'www.example.com'
      AND day > toDate(toDateTime(toString(toMonday(now(), 'Europe/Berlin')) || ' 00:00:00', 'Europe/Berlin'))
      AND day < toDate(now() - 1)
    UNION ALL
    SELECT path, hits, toUInt8(1) AS cur FROM hitcount.hits_1m
    WHERE site = 'www.example.com'
      AND minute >= toDateTime(toString(toMonday(now(), 'Europe/Berlin')) || ' 00:00:00', 'Europe/Berlin') AND minute < now()
      AND (toDate(minute) = toDate(toDateTime(toString(toMonday(now(), 'Europe/Berlin')) || ' 00:00:00', 'Europe/Berlin')) OR toDate(minute) = toDate(now() - 1))
) AS weeks
GROUP BY path
ORDER BY abs(change) DESC, path
LIMIT 20;

-- name: rejected lines per site and reason, last 7 days
-- rejects keeps a sample (up to 100 per batch); the collector's metric
-- hitcount_collector_lines_rejected_total counts them all. The byte column
-- is cut from the reason so that the same problem groups together.
SELECT site, replaceRegexpOne(reason, ' at column [0-9]+$', '') AS problem, count() AS sampled, min(inserted) AS first_seen, max(inserted) AS last_seen, any(line) AS example
FROM hitcount.rejects
WHERE inserted >= now() - INTERVAL 7 DAY
GROUP BY site, problem
ORDER BY sampled DESC
LIMIT 50;

-- name: hourly hits of one page against its baseline, last 24 hours
-- What a spike or drop rule compares (window: 1h, baseline: {periods: 7,
-- every: 1d}): each of the last 24 complete hours against the median of the
-- same hour of the day on the 7 days before them, hours without hits
-- counted as 0. Hours of the server's time zone, by the hour of the day
-- (a rule follows its own timezone's wall clock across a change of clocks:
-- docs/rules.md). ratio: the hour's hits over the baseline; a spike rule of
-- factor 3 fires at ratio >= 3 (and hits >= min), a drop of factor 4 at
-- ratio <= 0.25 (and baseline >= min_baseline).
SELECT hour, page_hits, baseline, if(baseline > 0, round(page_hits / baseline, 2), 0) AS ratio
FROM
(
    SELECT hour, toHour(hour) AS hour_of_day, sum(n) AS page_hits
    FROM
    (
        SELECT toStartOfHour(minute) AS hour, hits AS n
        FROM hitcount.hits_1m
        WHERE site = 'www.example.com' AND path = '/pricing'
          AND minute >= toStartOfHour(now()) - 24 * 3600 AND minute < toStartOfHour(now())
        UNION ALL
        SELECT toStartOfHour(now()) - (number + 1) * 3600 AS hour, toUInt64(0) AS n
        FROM system.numbers
        LIMIT 24
    ) AS recent_minutes
    GROUP BY hour
) AS recent
ANY LEFT JOIN
(
    SELECT toHour(hour) AS hour_of_day, medianExact(day_hits) AS baseline
    FROM
    (
        SELECT hour, sum(n) AS day_hits
        FROM
        (
            SELECT toStartOfHour(minute) AS hour, hits AS n
            FROM hitcount.hits_1m
            WHERE site = 'www.example.com' AND path = '/pricing'
              AND minute >= toStartOfHour(now()) - 8 * 86400 AND minute < toStartOfHour(now()) - 86400
            UNION ALL
            SELECT toStartOfHour(now()) - 86400 - (number + 1) * 3600 AS hour, toUInt64(0) AS n
            FROM system.numbers
            LIMIT 168
        ) AS past_minutes
        GROUP BY hour
    ) AS past_hours
    GROUP BY hour_of_day
) AS base USING hour_of_day
ORDER BY hour;

-- name: visitors per page and hour, last 7 days
-- A visitor is a distinct (client address, user agent) pair. hits_visitors_1m
-- keeps an exact distinct-count state per page and minute; uniqExactMerge over
-- any range of minutes is that range's exact count (never sum the minutes: a
-- visitor of several minutes would count several times). count: visitors rules
-- count their windows the same way. The states hold the collector's hash of the
-- whole address (hits.visitor), so sources with anonymize_clients, whose
-- hits.client is truncated, are counted exactly too.
SELECT site, path, toStartOfHour(minute) AS hour, uniqExactMerge(visitors) AS page_visitors
FROM hitcount.hits_visitors_1m
WHERE minute >= now() - INTERVAL 7 DAY
GROUP BY site, path, hour
ORDER BY hour DESC, page_visitors DESC
LIMIT 200;

-- name: visitors per site and day, last 30 days
-- One day's visitors of a whole site: a visitor of several pages counts once.
SELECT site, toDate(minute) AS day, uniqExactMerge(visitors) AS site_visitors
FROM hitcount.hits_visitors_1m
WHERE minute >= now() - INTERVAL 30 DAY
GROUP BY site, day
ORDER BY day DESC, site;
