// The PostgreSQL schema (version 1)
// =================================
//
// The same tables as SQLite's (storage/sqlite/sqlite_backend.cpp), created in the
// connection's current schema (the first of its search_path: `public`
// unless the URL says otherwise, e.g. ?options=-csearch_path%3Dfleet):
//
//   events, stream_heads, log_digest, store_info    the log and its chain
//   items, projects, project_actors, sessions,
//   terminal_locks, incident_links                  the projected rows
//   events_seq                                      the sequence seqs come from
//
// Every id column is `COLLATE "C"`, so that scans order ids bytewise, as
// the contract wants and verify's merge joins need.
//
// store_info holds 'schema_version' (kPostgresSchemaVersion,
// postgres_backend.hpp) and 'database_id'. An older store is migrated when a
// writer opens it (PostgresBackend::migrate, schema.cpp), one version at a
// time; how the engine meets the contract on these tables is in internal.hpp.
#pragma once

namespace cplane::storage::postgres {

// The shards of the log's digest (log_digest.shard 0..kDigestShards-1).
inline constexpr int kDigestShards = 64;

// The tables of a new store, at kPostgresSchemaVersion (several statements),
// but for the retention tables: run kRetentionTables after it.
extern const char* const kSchema;
// Version 5's tables (anchors, segments): a new store's and kMigration5's.
extern const char* const kRetentionTables;

// Version 2: the job lifecycle (the statuses scheduled and cancelled, retry
// policies, run_at, pause), as kSchema creates it whole.
extern const char* const kMigration2;
// Version 3: flow control (concurrency keys, limits, weights, priority).
extern const char* const kMigration3;

}  // namespace cplane::storage::postgres
