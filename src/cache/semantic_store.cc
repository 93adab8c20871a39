#include "cache/semantic_store.h"

#include <hnswlib/hnswlib.h>

#include <algorithm>
#include <utility>

namespace tailcut {

namespace {
// Bookkeeping charged per entry beyond its own bytes: the slot, maps and list nodes, and the
// index's links (M * 2 neighbours of 4 bytes at level 0, plus headers).
constexpr size_t kEntryOverheadBytes = 512;
constexpr size_t kInitialIndexCapacity = 64;
// The label of an entry kept for exact lookups only (stored without an embedding).
constexpr size_t kNoLabel = static_cast<size_t>(-1);
}  // namespace

size_t SemanticEntry::Bytes() const {
  size_t n = sizeof(SemanticEntry) + id.size() + partition.size() + query.size() + model.size() +
             variant.size() + finish_reason.size() + embedding.size() * sizeof(float) * 2;
  for (const auto& p : pieces) n += sizeof(CachedAnswerPiece) + p.text.size();
  return n + kEntryOverheadBytes;
}

struct SemanticStore::Slot {
  SemanticEntryPtr entry;
  Partition* partition = nullptr;
  size_t label = kNoLabel;
  size_t bytes = 0;
  Lru::iterator lru;
};

struct SemanticStore::Partition {
  // The index comes with the partition's first entry that has an embedding (the exact policy
  // stores none).
  void EnsureIndex(size_t dimensions, const SemanticStoreOptions& options) {
    if (index) return;
    space = std::make_unique<hnswlib::InnerProductSpace>(dimensions);
    index = std::make_unique<hnswlib::HierarchicalNSW<float>>(
        space.get(), kInitialIndexCapacity, static_cast<size_t>(options.hnsw_m),
        static_cast<size_t>(options.hnsw_ef_construction));
    index->setEf(static_cast<size_t>(options.hnsw_ef_search));
  }
  std::unique_ptr<hnswlib::InnerProductSpace> space;
  std::unique_ptr<hnswlib::HierarchicalNSW<float>> index;  // Points into `space`; may be null.
  std::vector<Slot*> by_label;                             // Null = free (marked deleted).
  std::vector<size_t> free_labels;
  std::unordered_map<std::string, Slot*> by_query;
  size_t live = 0;     // Entries.
  size_t indexed = 0;  // Entries with a point in the index.
};

SemanticStore::SemanticStore(const SemanticStoreOptions& options, const Clock& clock)
    : options_(options), clock_(clock) {}

SemanticStore::~SemanticStore() {
  for (Slot* slot : lru_) delete slot;
}

bool SemanticStore::ExpiredLocked(const SemanticEntry& entry, int64_t now) const {
  return options_.ttl_micros > 0 && now - entry.created_micros >= options_.ttl_micros;
}

void SemanticStore::RemoveLocked(Slot* slot) {
  Partition* p = slot->partition;
  if (slot->label != kNoLabel) {
    p->index->markDelete(slot->label);
    p->by_label[slot->label] = nullptr;
    p->free_labels.push_back(slot->label);
    --p->indexed;
  }
  auto q = p->by_query.find(slot->entry->query);
  if (q != p->by_query.end() && q->second == slot) p->by_query.erase(q);
  --p->live;
  by_id_.erase(slot->entry->id);
  lru_.erase(slot->lru);
  bytes_ -= static_cast<int64_t>(slot->bytes);
  if (p->live == 0) partitions_.erase(slot->entry->partition);  // Frees the index too.
  delete slot;
}

bool SemanticStore::Insert(SemanticEntryPtr shared) {
  const SemanticEntry& entry = *shared;
  const size_t bytes = entry.Bytes();
  if (static_cast<int64_t>(bytes) > options_.capacity_bytes) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  const bool embedded = !entry.embedding.empty();
  if (embedded && dimensions_ == 0) dimensions_ = entry.embedding.size();
  if ((embedded && entry.embedding.size() != dimensions_) || by_id_.count(entry.id) > 0) {
    return false;
  }
  const int64_t now = clock_.NowMicros();
  if (ExpiredLocked(entry, now)) return false;

  if (auto it = partitions_.find(entry.partition); it != partitions_.end()) {
    if (auto q = it->second->by_query.find(entry.query); q != it->second->by_query.end()) {
      RemoveLocked(q->second);  // The newer answer to the same text replaces the older.
    }
  }
  while (!lru_.empty() && bytes_ + static_cast<int64_t>(bytes) > options_.capacity_bytes) {
    Slot* victim = lru_.back();
    if (ExpiredLocked(*victim->entry, now)) {
      ++expired_;
    } else {
      ++evicted_;
    }
    RemoveLocked(victim);
  }
  auto& partition = partitions_[entry.partition];
  if (!partition) partition = std::make_unique<Partition>();
  Partition* p = partition.get();

  size_t label = kNoLabel;
  if (embedded) {
    p->EnsureIndex(dimensions_, options_);
    if (!p->free_labels.empty()) {
      label = p->free_labels.back();
      p->free_labels.pop_back();
    } else {
      label = p->by_label.size();
      if (label >= p->index->max_elements_) p->index->resizeIndex(p->index->max_elements_ * 2);
      p->by_label.push_back(nullptr);
    }
    // A reused label's point is updated in place and its deletion mark cleared.
    p->index->addPoint(entry.embedding.data(), label);
    ++p->indexed;
  }

  auto* slot = new Slot;
  slot->partition = p;
  slot->label = label;
  slot->bytes = bytes;
  slot->entry = std::move(shared);
  lru_.push_front(slot);
  slot->lru = lru_.begin();
  if (embedded) p->by_label[label] = slot;
  p->by_query[slot->entry->query] = slot;
  ++p->live;
  by_id_[slot->entry->id] = slot;
  bytes_ += static_cast<int64_t>(bytes);
  return true;
}

SemanticEntryPtr SemanticStore::FindExact(const std::string& partition, const std::string& query) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = partitions_.find(partition);
  if (it == partitions_.end()) return nullptr;
  auto q = it->second->by_query.find(query);
  if (q == it->second->by_query.end()) return nullptr;
  Slot* slot = q->second;
  if (ExpiredLocked(*slot->entry, clock_.NowMicros())) {
    ++expired_;
    RemoveLocked(slot);
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, slot->lru);
  return slot->entry;
}

std::vector<SemanticCandidate> SemanticStore::Search(const std::string& partition,
                                                     const std::vector<float>& embedding, int k,
                                                     float min_cosine) {
  std::vector<SemanticCandidate> out;
  if (k <= 0) return out;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = partitions_.find(partition);
  if (it == partitions_.end() || embedding.size() != dimensions_) return out;
  Partition* p = it->second.get();
  if (p->indexed == 0) return out;
  const int64_t now = clock_.NowMicros();
  auto found = p->index->searchKnn(embedding.data(), std::min<size_t>(k, p->indexed));
  std::vector<Slot*> expired;
  while (!found.empty()) {  // Farthest first.
    const auto [distance, label] = found.top();
    found.pop();
    Slot* slot = label < p->by_label.size() ? p->by_label[label] : nullptr;
    if (!slot) continue;
    if (ExpiredLocked(*slot->entry, now)) {
      expired.push_back(slot);
      continue;
    }
    const float cosine = 1.0f - distance;
    if (cosine >= min_cosine) out.push_back({slot->entry, cosine});
  }
  std::reverse(out.begin(), out.end());
  if (!out.empty()) {
    Slot* best = by_id_.at(out.front().entry->id);
    lru_.splice(lru_.begin(), lru_, best->lru);
  }
  // Last: removing the partition's last entry frees `p`.
  for (Slot* slot : expired) {
    ++expired_;
    RemoveLocked(slot);
  }
  return out;
}

bool SemanticStore::Contains(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return by_id_.count(id) > 0;
}

int64_t SemanticStore::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto n = static_cast<int64_t>(lru_.size());
  for (Slot* slot : lru_) delete slot;
  lru_.clear();
  by_id_.clear();
  partitions_.clear();
  bytes_ = 0;
  return n;
}

SemanticStoreStats SemanticStore::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  SemanticStoreStats s;
  s.entries = static_cast<int64_t>(lru_.size());
  s.bytes = bytes_;
  s.partitions = static_cast<int64_t>(partitions_.size());
  for (const auto& [name, p] : partitions_)
    s.index_slots += static_cast<int64_t>(p->by_label.size());
  s.evicted = evicted_;
  s.expired = expired_;
  return s;
}

}  // namespace tailcut
