// A Backend that forwards every call to another one and overrides nothing
// (leveldb's EnvWrapper). Derive from it and override only the calls you
// mean to observe or break: tests inject faults this way, never with flags
// in production code.
#pragma once

#include <memory>
#include <utility>

#include "storage/backend.hpp"

namespace cplane::storage {

class BackendWrapper : public Backend {
 public:
  explicit BackendWrapper(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  Backend& inner() { return *inner_; }

  void begin_write(Sync sync) override { inner_->begin_write(sync); }
  void begin_read() override { inner_->begin_read(); }
  void commit() override { inner_->commit(); }
  void rollback() noexcept override { inner_->rollback(); }
  Seq append(const Event& event) override { return inner_->append(event); }
  void import_event(const RawEvent& event) override { inner_->import_event(event); }
  void put_head(const StreamHead& head) override { inner_->put_head(head); }
  void put_log_digest(const LogDigest& digest) override { inner_->put_log_digest(digest); }
  std::unique_ptr<Cursor<StreamHead>> scan_heads(StreamKind kind) override {
    return inner_->scan_heads(kind);
  }
  std::vector<StreamHead> unfiled_heads() override { return inner_->unfiled_heads(); }
  std::optional<LogDigest> log_digest() override { return inner_->log_digest(); }
  std::string database_id() override { return inner_->database_id(); }
  int schema_version() const noexcept override { return inner_->schema_version(); }
  std::vector<RawEvent> stream_events(const StreamRef& stream) override {
    return inner_->stream_events(stream);
  }
  std::unique_ptr<Cursor<RawEvent>> scan_stream(StreamKind kind) override {
    return inner_->scan_stream(kind);
  }
  std::unique_ptr<Cursor<RawEvent>> scan_unfiled() override { return inner_->scan_unfiled(); }
  std::int64_t event_count() override { return inner_->event_count(); }
  std::optional<ItemRow> find_item(std::string_view item_id) override {
    return inner_->find_item(item_id);
  }
  std::optional<ItemRow> find_item_by_key(const std::string& project_id,
                                          std::string_view key) override {
    return inner_->find_item_by_key(project_id, key);
  }
  std::optional<Micros> next_lapse(const std::string& project_id) override {
    return inner_->next_lapse(project_id);
  }
  void announce_work() override { inner_->announce_work(); }
  void wait_for_work(std::chrono::steady_clock::time_point deadline) override {
    inner_->wait_for_work(deadline);
  }
  void insert_item(const ItemRow& row) override { inner_->insert_item(row); }
  void put_item(const ItemRow& row) override { inner_->put_item(row); }
  void update_item(const ItemRow& row) override { inner_->update_item(row); }
  void delete_item(std::string_view item_id) override { inner_->delete_item(item_id); }
  std::unique_ptr<Cursor<StreamAnchor>> scan_anchors(StreamKind kind) override {
    return inner_->scan_anchors(kind);
  }
  std::vector<std::string> ended_streams(StreamKind kind, Micros before,
                                         const std::string* project_id,
                                         std::size_t limit) override {
    return inner_->ended_streams(kind, before, project_id, limit);
  }
  void archive_stream(const StreamAnchor& anchor) override { inner_->archive_stream(anchor); }
  void import_anchor(const StreamAnchor& anchor) override { inner_->import_anchor(anchor); }
  void delete_anchor(const StreamRef& stream) override { inner_->delete_anchor(stream); }
  std::optional<StreamAnchor> find_anchor(const StreamRef& stream) override {
    return inner_->find_anchor(stream);
  }
  std::optional<StreamAnchor> find_anchor_by_key(const std::string& project_id,
                                                 std::string_view key) override {
    return inner_->find_anchor_by_key(project_id, key);
  }
  void put_segment(const SegmentRecord& segment) override { inner_->put_segment(segment); }
  void delete_segment(const std::string& segment_id) override { inner_->delete_segment(segment_id); }
  std::set<std::string> anchored_segments() override { return inner_->anchored_segments(); }
  void set_patient_reads(bool on) override { inner_->set_patient_reads(on); }
  void expect_first_read(const FirstRead& read) override { inner_->expect_first_read(read); }
  std::vector<SegmentRecord> segments() override { return inner_->segments(); }
  std::optional<ItemRow> oldest_ready(const std::string& project_id) override {
    return inner_->oldest_ready(project_id);
  }
  std::optional<ItemRow> earliest_lapsed(Micros now, const std::string& project_id) override {
    return inner_->earliest_lapsed(now, project_id);
  }
  std::vector<CandidateList> claim_candidates(Micros now, const std::string* actor,
                                              std::size_t limit) override {
    return inner_->claim_candidates(now, actor, limit);
  }
  std::optional<ItemRow> earliest_due(Micros now, const std::string& project_id) override {
    return inner_->earliest_due(now, project_id);
  }
  std::vector<std::string> claimable_project_ids(const std::string* actor) override {
    return inner_->claimable_project_ids(actor);
  }
  std::vector<ItemRow> items_in_status(const std::string& project_id, ItemStatus status,
                                       std::size_t limit) override {
    return inner_->items_in_status(project_id, status, limit);
  }
  std::vector<Seq> append_batch(const std::vector<Event>& events) override {
    return inner_->append_batch(events);
  }
  std::vector<std::optional<ItemRow>> find_items(const std::vector<std::string>& item_ids) override {
    return inner_->find_items(item_ids);
  }
  std::vector<ItemRow> lapsed_items(Micros now, const std::string& project_id) override {
    return inner_->lapsed_items(now, project_id);
  }
  std::unique_ptr<Cursor<ScannedItem>> scan_items() override { return inner_->scan_items(); }
  std::unique_ptr<Cursor<ItemRow>> scan_allocatable(const std::string& project_id) override {
    return inner_->scan_allocatable(project_id);
  }
  void put_terminal_lock(const TerminalLockRow& row) override { inner_->put_terminal_lock(row); }
  void delete_terminal_lock(std::string_view item_id) override {
    inner_->delete_terminal_lock(item_id);
  }
  std::unique_ptr<Cursor<TerminalLockRow>> scan_terminal_locks() override {
    return inner_->scan_terminal_locks();
  }
  std::optional<IncidentLinkRow> find_incident(std::string_view incident_id) override {
    return inner_->find_incident(incident_id);
  }
  void put_incident(const IncidentLinkRow& row) override { inner_->put_incident(row); }
  void delete_incident(std::string_view incident_id) override {
    inner_->delete_incident(incident_id);
  }
  std::unique_ptr<Cursor<IncidentLinkRow>> scan_incidents() override {
    return inner_->scan_incidents();
  }
  std::vector<IncidentLinkRow> incidents_for(std::string_view target) override {
    return inner_->incidents_for(target);
  }
  std::optional<SessionRow> find_session(std::string_view session_id) override {
    return inner_->find_session(session_id);
  }
  void put_session(const SessionRow& row) override { inner_->put_session(row); }
  void delete_session(std::string_view session_id) override {
    inner_->delete_session(session_id);
  }
  std::vector<ItemRow> session_items(std::string_view session_id) override {
    return inner_->session_items(session_id);
  }
  std::optional<ScheduleRow> find_schedule(std::string_view name) override {
    return inner_->find_schedule(name);
  }
  void put_schedule(const ScheduleRow& row) override { inner_->put_schedule(row); }
  void delete_schedule(std::string_view name) override { inner_->delete_schedule(name); }
  std::unique_ptr<Cursor<ScheduleRow>> scan_schedules() override {
    return inner_->scan_schedules();
  }
  std::optional<LimitRow> find_limit(std::string_view key) override {
    return inner_->find_limit(key);
  }
  void put_limit(const LimitRow& row) override { inner_->put_limit(row); }
  void delete_limit(std::string_view key) override { inner_->delete_limit(key); }
  std::unique_ptr<Cursor<LimitRow>> scan_limits() override { return inner_->scan_limits(); }
  std::int64_t live_leases(std::string_view key, Micros now) override {
    return inner_->live_leases(key, now);
  }
  std::vector<ItemRow> key_holders(std::string_view key, Micros now, std::size_t limit) override {
    return inner_->key_holders(key, now, limit);
  }
  std::vector<ItemRow> key_heads(const std::string& project_id, ItemStatus status,
                                 std::size_t limit) override {
    return inner_->key_heads(project_id, status, limit);
  }
  std::int64_t ready_ahead(const ItemRow& row) override { return inner_->ready_ahead(row); }
  std::vector<ScheduleRow> due_schedules(Micros now, std::size_t limit) override {
    return inner_->due_schedules(now, limit);
  }
  std::unique_ptr<Cursor<SessionRow>> scan_sessions() override {
    return inner_->scan_sessions();
  }
  std::optional<ProjectRow> find_project(std::string_view project_id) override {
    return inner_->find_project(project_id);
  }
  std::optional<ProjectRow> lock_project(std::string_view project_id) override {
    return inner_->lock_project(project_id);
  }
  void put_project(const ProjectRow& row) override { inner_->put_project(row); }
  void delete_project(std::string_view project_id) override {
    inner_->delete_project(project_id);
  }
  bool is_assigned(std::string_view project_id, std::string_view actor) override {
    return inner_->is_assigned(project_id, actor);
  }
  void put_assignment(const ProjectActorRow& row) override { inner_->put_assignment(row); }
  void delete_assignment(std::string_view project_id, std::string_view actor) override {
    inner_->delete_assignment(project_id, actor);
  }
  std::vector<std::string> project_ids(const std::string* actor) override {
    return inner_->project_ids(actor);
  }
  std::vector<ProjectRow> all_projects() override { return inner_->all_projects(); }
  std::vector<ProjectActorRow> all_assignments() override { return inner_->all_assignments(); }
  Seq last_seq() override { return inner_->last_seq(); }
  bool seqs_dense() override { return inner_->seqs_dense(); }
  void put_seqs_sparse() override { inner_->put_seqs_sparse(); }
  CombineArea* combine_area() override { return inner_->combine_area(); }
  void savepoint() override { inner_->savepoint(); }
  void release_savepoint() override { inner_->release_savepoint(); }
  bool rollback_to_savepoint() noexcept override { return inner_->rollback_to_savepoint(); }
  std::uint64_t rows_written() noexcept override { return inner_->rows_written(); }
  std::uint64_t round_trips() noexcept override { return inner_->round_trips(); }
  bool in_write_transaction() noexcept override { return inner_->in_write_transaction(); }
  void tag_requests(std::uint64_t request_id) override { inner_->tag_requests(request_id); }
  void defer_checkpoints(bool on) override { inner_->defer_checkpoints(on); }
  void checkpoint_if_due() noexcept override { inner_->checkpoint_if_due(); }
  std::unique_ptr<Cursor<RawEvent>> scan_after(Seq after) override {
    return inner_->scan_after(after);
  }
  Micros now() override { return inner_->now(); }
  std::vector<ItemRow> list_items(const ItemListing& listing) override {
    return inner_->list_items(listing);
  }
  std::vector<RawEvent> read_final(Seq after, std::size_t max, const StreamRef* stream) override {
    return inner_->read_final(after, max, stream);
  }
  Seq final_horizon() override { return inner_->final_horizon(); }
  void wait_for_commit(std::chrono::steady_clock::time_point deadline) override {
    inner_->wait_for_commit(deadline);
  }
  std::array<std::int64_t, kItemStatuses + 1> status_counts(const std::string* project_id) override {
    return inner_->status_counts(project_id);
  }
  // ---- metrics gauges
  std::vector<ProjectGauges> project_gauges(Micros now) override {
    return inner_->project_gauges(now);
  }
  std::vector<std::string> claimed_items() override {
    return inner_->claimed_items();
  }

 private:
  std::unique_ptr<Backend> inner_;
};

}  // namespace cplane::storage
