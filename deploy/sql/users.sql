-- hitcount: least-privilege ClickHouse users, for ClickHouse >= 20.5 (SQL RBAC).
-- ClickHouse 18.16 has no CREATE USER or GRANT: use users-18.xml there.
--
--   1. Replace every 'REPLACE_ME_...' password below (and narrow HOST ANY to
--      your networks, e.g. HOST IP '10.0.0.0/8').
--   2. As an admin (a user with access_management):
--        clickhouse-client --user admin --ask-password --multiquery < users.sql
--      In a cluster, add ON CLUSTER <name> after each user name and each GRANT's
--      object, or run the file on every server (users are per server unless the
--      server stores them in replicated storage).
--   3. Create the schema once, as a privileged user (default or admin):
--        collector -migrate -config admin.yaml
--      where admin.yaml is the usual config with clickhouse.username set to that
--      user. It creates the database hitcount and every table and view. Run
--      it again after upgrading ClickHouse or hitcount: it brings existing
--      tables up to the schema (the deduplication window), which the
--      collector user (no ALTER) cannot.
--   4. Point each component at its own user (clickhouse.username, password_env):
--      the collector at collector, the sweeper at sweeper, dashboards at analyst.
--
-- Every statement is idempotent (IF NOT EXISTS, GRANT adds), so running the
-- file again after a hitcount upgrade adds what the new version needs.

-- collector: inserts parsed lines, rejects and sources; reads the committed
-- offsets (ingest_progress) and which of its inserts still run
-- (system.processes) to resume exactly once; writes and reads
-- source_owners (which collector ships each file: one per file).
CREATE USER IF NOT EXISTS collector IDENTIFIED WITH sha256_password BY 'REPLACE_ME_collector_password' HOST ANY;
GRANT INSERT ON hitcount.hits TO collector;
GRANT INSERT ON hitcount.rejects TO collector;
GRANT INSERT ON hitcount.sources TO collector;
GRANT SELECT, INSERT ON hitcount.source_owners TO collector;
GRANT SELECT ON hitcount.ingest_progress TO collector;
GRANT SELECT ON system.processes TO collector;
-- An insert into hits (and rejects) also runs the materialized views that feed
-- the rollups, as the inserting user: ClickHouse requires SELECT on the
-- columns those views read and, before SQL SECURITY DEFINER views (24.2),
-- INSERT on their target tables. Only the columns the views read: not
-- client, remote_user, referer or query.
GRANT SELECT(ts, site, host, method, path, status, bytes, user_agent, source_id, offset, visitor) ON hitcount.hits TO collector;
GRANT SELECT(site, source_id, offset) ON hitcount.rejects TO collector;
GRANT INSERT ON hitcount.ingest_progress TO collector;
GRANT INSERT ON hitcount.hits_1m TO collector;
GRANT INSERT ON hitcount.hits_touched TO collector;
GRANT INSERT ON hitcount.hits_1d TO collector;
GRANT INSERT ON hitcount.hits_visitors_1m TO collector;

-- sweeper: reads the rollups and its own state, appends crossings and sweeps.
CREATE USER IF NOT EXISTS sweeper IDENTIFIED WITH sha256_password BY 'REPLACE_ME_sweeper_password' HOST ANY;
GRANT SELECT ON hitcount.hits_touched TO sweeper;
GRANT SELECT ON hitcount.hits_1m TO sweeper;
GRANT SELECT ON hitcount.hits_1d TO sweeper;
-- count: visitors rules read the visitors rollup.
GRANT SELECT ON hitcount.hits_visitors_1m TO sweeper;
GRANT SELECT ON hitcount.crossings TO sweeper;
GRANT SELECT ON hitcount.sweeps TO sweeper;
-- below and no_traffic rules wait for complete windows: how far each
-- collector has committed its files (source_owners.caught_up).
GRANT SELECT ON hitcount.source_owners TO sweeper;
GRANT INSERT ON hitcount.crossings TO sweeper;
GRANT INSERT ON hitcount.sweeps TO sweeper;
-- With sweep.claims: keepermap (ClickHouse >= 23 with Keeper), the claims are
-- rows of the KeeperMap table hitcount.claims: the sweeper reads a claim,
-- inserts one, and deletes its own (ALTER TABLE ... DELETE by key and token).
-- It creates the table at its first start (CREATE TABLE on that one name
-- only); once it exists the sweeper creates nothing, and the CREATE grant
-- may be left out if an administrator created the table. Harmless with
-- other claims (the table is never created then).
GRANT SELECT, INSERT, ALTER DELETE ON hitcount.claims TO sweeper;
GRANT CREATE TABLE ON hitcount.claims TO sweeper;

-- The schema at start: the collector and the sweeper create only what is
-- missing, and see what exists through system.tables, which lists the tables
-- a user has a privilege on. SHOW TABLES lets them see the views too, so a
-- current schema needs no CREATE right at all.
GRANT SHOW TABLES ON hitcount.* TO collector, sweeper;

-- analyst: dashboards and deploy/queries.sql; reads everything in hitcount,
-- writes nothing.
CREATE USER IF NOT EXISTS analyst IDENTIFIED WITH sha256_password BY 'REPLACE_ME_analyst_password' HOST ANY;
GRANT SELECT ON hitcount.* TO analyst;
