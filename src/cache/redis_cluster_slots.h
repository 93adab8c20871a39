// Redis Cluster's key-to-slot mapping and the pieces of the protocol RedisClusterClient routes
// with: CRC16 slots with hash tags, node address lists ("host:port,host:port"), CLUSTER SLOTS
// replies and MOVED/ASK redirections. Pure functions over values and replies; no I/O.
//
// Debian 12 (the project's only C/C++ package source) packages hiredis 0.14 but no cluster
// client (neither hiredis-cluster nor redis-plus-plus), so the routing is ours, kept to what
// Redis's cluster specification defines (https://redis.io/docs/reference/cluster-spec/).
//
// Thread-safety: every function is safe from any thread (no shared state).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

struct redisReply;

namespace tailcut {

inline constexpr int kRedisClusterSlots = 16384;

// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the checksum Redis Cluster hashes
// keys with; CRC16("123456789") = 0x31C3.
uint16_t RedisCrc16(std::string_view data);

// The part of `key` that is hashed: the text between the first '{' and the first '}' after
// it, when that text is not empty; otherwise the whole key ("{}x" and "{x" hash whole).
std::string_view RedisHashTag(std::string_view key);

// The slot (0..16383) a key lives in: CRC16(hash tag) mod 16384.
int RedisKeySlot(std::string_view key);

struct RedisNodeAddress {
  std::string host;
  int port = 0;

  // "host:port" ("[v6]:port" for an IPv6 literal), the node's name in logs and metrics.
  std::string ToString() const;
  bool operator==(const RedisNodeAddress&) const = default;
  auto operator<=>(const RedisNodeAddress&) const = default;
};

// Parses "host:port" (an IPv6 literal in brackets: "[::1]:7000").
Result<RedisNodeAddress> ParseRedisNodeAddress(std::string_view text);
// Parses a comma-separated list of "host:port" (spaces around entries ignored); at least one.
Result<std::vector<RedisNodeAddress>> ParseRedisNodeList(std::string_view list);

// One row of CLUSTER SLOTS: slots [first, last] served by `master`, copied to `replicas`.
struct RedisSlotRange {
  int first = 0;
  int last = 0;
  RedisNodeAddress master;
  std::vector<RedisNodeAddress> replicas;
};

// Parses a CLUSTER SLOTS reply. A node whose address the server does not know (an empty
// host, or "?") is `answered_by`'s host, as Redis documents it: the node that answered. Ranges
// outside 0..16383 or with first > last are an error, as is any other shape.
Result<std::vector<RedisSlotRange>> ParseClusterSlots(const redisReply* reply,
                                                      const RedisNodeAddress& answered_by);

// "-MOVED <slot> <host:port>" (the slot has a new owner: update the map) or "-ASK <slot>
// <host:port>" (the slot is migrating: ask that node once, after ASKING, and keep the map).
struct RedisRedirect {
  enum class Kind { kMoved, kAsk };
  Kind kind = Kind::kMoved;
  int slot = 0;
  RedisNodeAddress target;
};

// The redirection an error reply's text describes; nullopt for any other error. An empty
// host (Redis 7 with an unknown endpoint: "MOVED 3999 :6381") is `answered_by`'s host.
std::optional<RedisRedirect> ParseRedisRedirect(std::string_view error,
                                                const RedisNodeAddress& answered_by);

}  // namespace tailcut
