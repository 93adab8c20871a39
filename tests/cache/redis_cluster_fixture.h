// RedisCluster: a private, throwaway Redis Cluster for tests: masters x (1 + replicas) real
// redis-server processes (redis_server_fixture.h) on free loopback ports, each with
// --cluster-enabled yes, its own nodes.conf and cluster bus port, joined by
// `redis-cli --cluster create ... --cluster-replicas R --cluster-yes`. Start() returns once
// every node reports cluster_state:ok and agrees on who serves every slot, and every replica
// is in sync with its master.
//
// The node timeout is small (node_timeout_millis) so that a killed master fails over in about
// a second. Every wait polls with a deadline; none is a fixed sleep.
//
// The binaries: redis-server as redis_server_fixture.h finds it, and redis-cli
// ($TAILCUT_REDIS_CLI, else next to redis-server, else on PATH).
//
// Thread-safety: none; drive it from the test thread. Commands open their own connections.
#pragma once

#include <hiredis/hiredis.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/cache/redis_server_fixture.h"

namespace tailcut::testing {

class RedisCluster {
 public:
  // One row of CLUSTER NODES, as far as tests need it.
  struct NodeInfo {
    std::string id;
    int port = 0;
    bool master = false;
    bool failed = false;                     // "fail" or "fail?" among the flags.
    std::string master_id;                   // For a replica.
    std::vector<std::pair<int, int>> slots;  // Ranges served (masters).
  };

  // Starts masters x (1 + replicas) nodes and makes them a cluster; false with `error` set.
  bool Start(int masters, int replicas, int node_timeout_millis, std::string* error) {
    const std::string cli = FindCli();
    if (cli.empty()) {
      *error = "redis-cli not found ($TAILCUT_REDIS_CLI, beside redis-server, PATH)";
      return false;
    }
    const int count = masters * (1 + replicas);
    for (int i = 0; i < count; ++i) {
      bool started = false;
      for (int attempt = 0; attempt < 5 && !started; ++attempt) {
        const int bus = RedisServer::FreePort();
        auto node = std::make_unique<RedisServer>(std::vector<std::string>{
            "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", std::to_string(node_timeout_millis), "--cluster-port",
            std::to_string(bus), "--appendonly", "no",
            // Replicas sync at once, not after the default 5 s wait for more replicas.
            "--repl-diskless-sync-delay", "0"});
        std::string e;
        if (node->Start(&e)) {
          nodes_.push_back(std::move(node));
          started = true;
        } else {
          *error = e;
        }
      }
      if (!started) return false;
    }
    std::string command = "timeout 60 " + cli + " --cluster create";
    for (const auto& n : nodes_) command += " 127.0.0.1:" + std::to_string(n->port());
    command += " --cluster-replicas " + std::to_string(replicas) + " --cluster-yes 2>&1";
    std::string output;
    if (FILE* p = popen(command.c_str(), "r"); p != nullptr) {
      char buf[4096];
      size_t got;
      while ((got = fread(buf, 1, sizeof(buf), p)) > 0) output.append(buf, got);
      if (pclose(p) != 0) {
        *error = "redis-cli --cluster create failed:\n" + output;
        return false;
      }
    } else {
      *error = "popen(redis-cli) failed";
      return false;
    }
    if (!WaitHealthy(std::chrono::seconds(30), error)) {
      *error = "cluster did not settle after create: " + *error + "\n" + output;
      return false;
    }
    return true;
  }

  size_t size() const { return nodes_.size(); }
  RedisServer& node(size_t i) { return *nodes_[i]; }

  // "127.0.0.1:p1,127.0.0.1:p2,..." of every node (or of the first `n`).
  std::string Seeds(size_t n = 0) const {
    std::string out;
    for (size_t i = 0; i < nodes_.size() && (n == 0 || i < n); ++i) {
      out +=
          (out.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(nodes_[i]->port());
    }
    return out;
  }

  // The index of the node on `port`; -1 if none.
  int IndexOfPort(int port) const {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i]->port() == port) return static_cast<int>(i);
    }
    return -1;
  }

  // CLUSTER NODES as `asker` sees it; empty when it does not answer.
  std::vector<NodeInfo> Nodes(size_t asker) const {
    std::vector<NodeInfo> out;
    const std::string text = nodes_[asker]->CommandText({"CLUSTER", "NODES"});
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream f(line);
      std::vector<std::string> w;
      for (std::string s; f >> s;) w.push_back(s);
      if (w.size() < 8) continue;
      NodeInfo n;
      n.id = w[0];
      const size_t colon = w[1].find(':');
      if (colon == std::string::npos) continue;
      n.port = std::atoi(w[1].c_str() + colon + 1);
      n.master = w[2].find("master") != std::string::npos;
      n.failed = w[2].find("fail") != std::string::npos;
      n.master_id = w[3];
      for (size_t i = 8; i < w.size(); ++i) {
        if (w[i].empty() || w[i][0] == '[') continue;  // Migrating/importing markers.
        const size_t dash = w[i].find('-');
        const int first = std::atoi(w[i].c_str());
        const int last = dash == std::string::npos ? first : std::atoi(w[i].c_str() + dash + 1);
        n.slots.emplace_back(first, last);
      }
      out.push_back(std::move(n));
    }
    return out;
  }

  // The index of the node serving `slot` as master, as `asker` sees it; -1 if none.
  int MasterOfSlot(int slot, size_t asker = 0) const {
    for (const NodeInfo& n : Nodes(asker)) {
      if (!n.master || n.failed) continue;
      for (const auto& [first, last] : n.slots) {
        if (slot >= first && slot <= last) return IndexOfPort(n.port);
      }
    }
    return -1;
  }

  // Indices of the live masters serving slots, as `asker` sees them.
  std::vector<int> Masters(size_t asker = 0) const {
    std::vector<int> out;
    for (const NodeInfo& n : Nodes(asker)) {
      if (n.master && !n.failed && !n.slots.empty()) out.push_back(IndexOfPort(n.port));
    }
    return out;
  }

  // The index of a replica of master `index`, as `asker` sees it; -1 if none.
  int ReplicaOf(int index, size_t asker) const {
    std::string id;
    const std::vector<NodeInfo> all = Nodes(asker);
    for (const NodeInfo& n : all) {
      if (n.port == nodes_[static_cast<size_t>(index)]->port()) id = n.id;
    }
    for (const NodeInfo& n : all) {
      if (!n.master && n.master_id == id && !n.failed) return IndexOfPort(n.port);
    }
    return -1;
  }

  std::string NodeId(size_t i) const { return nodes_[i]->CommandText({"CLUSTER", "MYID"}); }

  // Until replica `replica` has applied everything master `master` has written
  // (slave_repl_offset >= the master's master_repl_offset), or `timeout`; false with `error`
  // set. WAIT cannot say this for a test: it counts acknowledgements of the asking
  // connection's own writes, and the fixture's connections write nothing.
  bool WaitReplicaCaughtUp(int master, int replica, std::chrono::milliseconds timeout,
                           std::string* error) const {
    const auto give_up = std::chrono::steady_clock::now() + timeout;
    const int64_t target = InfoNumber(static_cast<size_t>(master), "master_repl_offset");
    while (true) {
      const int64_t applied = InfoNumber(static_cast<size_t>(replica), "slave_repl_offset");
      if (target >= 0 && applied >= target) return true;
      if (std::chrono::steady_clock::now() > give_up) {
        *error = "replica " + std::to_string(nodes_[static_cast<size_t>(replica)]->port()) +
                 " at offset " + std::to_string(applied) + ", its master at " +
                 std::to_string(target);
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // Until every live node says cluster_state:ok and they all name the same master for every
  // slot (probed at range starts), or `timeout`; false with `error` set.
  bool WaitHealthy(std::chrono::milliseconds timeout, std::string* error) const {
    const auto give_up = std::chrono::steady_clock::now() + timeout;
    while (true) {
      std::string why;
      if (Healthy(&why)) return true;
      if (std::chrono::steady_clock::now() > give_up) {
        *error = why;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

 private:
  bool Healthy(std::string* why) const {
    std::map<int, int> owner_seen;  // Slot -> port of its master, across askers.
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i]->pid() <= 0) continue;  // Killed by the test.
      const std::string info = nodes_[i]->CommandText({"CLUSTER", "INFO"});
      if (info.find("cluster_state:ok") == std::string::npos) {
        *why = "node " + std::to_string(nodes_[i]->port()) + " not ok: " + info.substr(0, 40);
        return false;
      }
      const std::string replication = nodes_[i]->CommandText({"INFO", "replication"});
      if (replication.find("role:slave") != std::string::npos &&
          replication.find("master_link_status:up") == std::string::npos) {
        *why = "replica " + std::to_string(nodes_[i]->port()) + " not in sync with its master";
        return false;
      }
      int covered = 0;
      for (const NodeInfo& n : Nodes(i)) {
        if (!n.master || n.failed) continue;
        for (const auto& [first, last] : n.slots) {
          covered += last - first + 1;
          auto [it, fresh] = owner_seen.emplace(first, n.port);
          if (!fresh && it->second != n.port) {
            *why = "nodes disagree on slot " + std::to_string(first);
            return false;
          }
        }
      }
      if (covered != 16384) {
        *why = "node " + std::to_string(nodes_[i]->port()) + " sees " + std::to_string(covered) +
               " slots served";
        return false;
      }
    }
    return true;
  }

  // A number field of node `i`'s INFO replication; -1 when absent.
  int64_t InfoNumber(size_t i, const std::string& field) const {
    const std::string text = nodes_[i]->CommandText({"INFO", "replication"});
    const size_t at = text.find(field + ":");
    if (at == std::string::npos) return -1;
    return std::atoll(text.c_str() + at + field.size() + 1);
  }

  static std::string FindCli() {
    if (const char* env = std::getenv("TAILCUT_REDIS_CLI"); env != nullptr && *env != '\0') {
      return access(env, X_OK) == 0 ? env : "";
    }
    const std::string server = RedisServer::FindBinary();
    if (!server.empty()) {
      const std::string beside = server.substr(0, server.rfind('/') + 1) + "redis-cli";
      if (access(beside.c_str(), X_OK) == 0) return beside;
    }
    return access("/usr/bin/redis-cli", X_OK) == 0 ? "/usr/bin/redis-cli" : "";
  }

  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace tailcut::testing
