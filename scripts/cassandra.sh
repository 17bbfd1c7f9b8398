#!/usr/bin/env bash
# Apache Cassandra peer for Shoal's driver tests and benchmarks.
#
#   scripts/cassandra.sh [install]        fetch the jars from Maven Central (idempotent)
#   scripts/cassandra.sh start [PORT] [DIR]
#                                         install if needed, write DIR/conf/cassandra.yaml,
#                                         start in the background, wait until CQL is up
#   scripts/cassandra.sh stop [DIR]       stop the node started with DIR (default: the last one)
#   scripts/cassandra.sh status [DIR]
#
# Env: CASSANDRA_VERSION (default 5.0.9; 4.1.10 also works), CASSANDRA_HEAP (default 1G),
#      CASSANDRA_STORAGE_PORT (7000), CASSANDRA_JMX_PORT (7199), CASSANDRA_START_TIMEOUT (120 s),
#      CASSANDRA_TASKSET (unset; a CPU list: start the JVM under `taskset -c LIST`, as bench/ does).
#      Where Maven Central cannot be reached, point the installer at jars you have:
#      CASSANDRA_TARBALL=/path/apache-cassandra-$VERSION-bin.tar.gz  (its lib/ is used), or
#      CASSANDRA_LIB_DIR=/dir/with/cassandra-all-$VERSION.jar-and-its-dependencies.
# Everything lives under bench/peers/cassandra/ (gitignored).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="${CASSANDRA_VERSION:-5.0.9}"
BASE="$ROOT/bench/peers/cassandra"
HOME_DIR="$BASE/$VERSION"
LIB="$HOME_DIR/lib"
HEAP="${CASSANDRA_HEAP:-1G}"
STORAGE_PORT="${CASSANDRA_STORAGE_PORT:-7000}"
JMX_PORT="${CASSANDRA_JMX_PORT:-7199}"
START_TIMEOUT="${CASSANDRA_START_TIMEOUT:-120}"
PIN=()
[[ -z "${CASSANDRA_TASKSET:-}" ]] || PIN=(taskset -c "$CASSANDRA_TASKSET")

log() { echo "cassandra.sh: $*" >&2; }

install() {
    if [[ -f "$HOME_DIR/.installed" ]] && ls "$LIB"/*.jar >/dev/null 2>&1; then
        log "Cassandra $VERSION already installed in $HOME_DIR"
        return 0
    fi
    command -v java >/dev/null || { log "java not found (need Java 11/17)"; exit 1; }
    mkdir -p "$HOME_DIR"
    if [[ -n "${CASSANDRA_TARBALL:-}" || -n "${CASSANDRA_LIB_DIR:-}" ]]; then
        rm -rf "$LIB"; mkdir -p "$LIB"
        if [[ -n "${CASSANDRA_TARBALL:-}" ]]; then
            log "unpacking the jars of $CASSANDRA_TARBALL"
            tar -xzf "$CASSANDRA_TARBALL" -C "$LIB" --strip-components=2 --wildcards '*/lib/*.jar'
        else
            log "copying jars from $CASSANDRA_LIB_DIR"
            cp "$CASSANDRA_LIB_DIR"/*.jar "$LIB"/
        fi
        ls "$LIB"/cassandra-all-"$VERSION".jar >/dev/null 2>&1 || ls "$LIB"/apache-cassandra-"$VERSION".jar >/dev/null \
            || { log "no cassandra $VERSION jar found"; exit 1; }
        touch "$HOME_DIR/.installed"
        log "installed $(ls "$LIB" | wc -l) jars into $LIB"
        return 0
    fi
    command -v mvn >/dev/null || { log "mvn not found (apt-get install maven)"; exit 1; }
    if [[ ! -f "$HOME/.m2/settings.xml" ]] && ! getent hosts repo.maven.apache.org >/dev/null 2>&1; then
        log "Maven Central (repo.maven.apache.org) cannot be resolved from this machine;"
        log "set CASSANDRA_TARBALL or CASSANDRA_LIB_DIR (see the header of $0)"
        exit 1
    fi
    cat >"$HOME_DIR/pom.xml" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 http://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>shoal.peers</groupId>
  <artifactId>cassandra-peer</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.cassandra</groupId>
      <artifactId>cassandra-all</artifactId>
      <version>$VERSION</version>
    </dependency>
  </dependencies>
</project>
POM
    log "fetching cassandra-all $VERSION and its dependencies from Maven Central"
    rm -rf "$LIB"
    if ! (cd "$HOME_DIR" && timeout 900 mvn -q -B -U dependency:copy-dependencies \
            -DincludeScope=runtime -DoutputDirectory=lib); then
        log "mvn could not fetch cassandra-all $VERSION; set CASSANDRA_TARBALL or CASSANDRA_LIB_DIR instead"
        exit 1
    fi
    ls "$LIB"/cassandra-all-"$VERSION".jar >/dev/null
    touch "$HOME_DIR/.installed"
    log "installed $(ls "$LIB" | wc -l) jars into $LIB"
}

jamm_jar() {
    local j
    j="$(ls "$LIB"/jamm-*.jar 2>/dev/null | head -n1 || true)"
    [[ -n "$j" ]] || { log "no jamm jar in $LIB"; exit 1; }
    echo "$j"
}

write_conf() { # DIR PORT
    local dir="$1" port="$2"
    mkdir -p "$dir/conf" "$dir/data" "$dir/commitlog" "$dir/saved_caches" "$dir/hints" \
             "$dir/cdc_raw" "$dir/logs"
    local extra=""
    if [[ "$VERSION" == 5.* ]]; then
        extra="storage_compatibility_mode: NONE"
    fi
    cat >"$dir/conf/cassandra.yaml" <<YAML
cluster_name: 'Shoal Peer Cluster'
num_tokens: 16
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:$STORAGE_PORT"
listen_address: 127.0.0.1
rpc_address: 127.0.0.1
storage_port: $STORAGE_PORT
native_transport_port: $port
start_native_transport: true
data_file_directories:
  - $dir/data
commitlog_directory: $dir/commitlog
saved_caches_directory: $dir/saved_caches
hints_directory: $dir/hints
cdc_raw_directory: $dir/cdc_raw
commitlog_sync: periodic
commitlog_sync_period: 10000ms
authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer
auto_snapshot: false
$extra
YAML
    cat >"$dir/conf/logback.xml" <<XML
<configuration scan="false">
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>$dir/logs/system.log</file>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
XML
}

jvm_opts() { # DIR
    local dir="$1"
    cat <<OPTS
-Xms$HEAP
-Xmx$HEAP
-Xss256k
-XX:+UseG1GC
-XX:+ParallelRefProcEnabled
-XX:MaxTenuringThreshold=1
-XX:G1HeapRegionSize=16m
-XX:MaxGCPauseMillis=300
-XX:+HeapDumpOnOutOfMemoryError
-XX:HeapDumpPath=$dir/logs
-Djava.net.preferIPv4Stack=true
-Djdk.attach.allowAttachSelf=true
-Dio.netty.tryReflectionSetAccessible=true
-Dio.netty.allocator.useCacheForAllThreads=true
-Dio.netty.allocator.maxOrder=11
-Dcassandra.config=file://$dir/conf/cassandra.yaml
-Dcassandra-foreground=yes
-Dcassandra.storagedir=$dir
-Dcassandra.logdir=$dir/logs
-Dlogback.configurationFile=file://$dir/conf/logback.xml
-Dcassandra.jmx.local.port=$JMX_PORT
-Dcassandra.skip_wait_for_gossip_to_settle=0
-javaagent:$(jamm_jar)
--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED
--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED
--add-exports=java.base/sun.nio.ch=ALL-UNNAMED
--add-exports=java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED
--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED
--add-exports=java.rmi/sun.rmi.server=ALL-UNNAMED
--add-exports=java.sql/java.sql=ALL-UNNAMED
--add-exports=java.base/java.lang.ref=ALL-UNNAMED
--add-exports=jdk.unsupported/sun.misc=ALL-UNNAMED
--add-opens=java.base/java.lang.module=ALL-UNNAMED
--add-opens=java.base/jdk.internal.loader=ALL-UNNAMED
--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED
--add-opens=java.base/jdk.internal.reflect=ALL-UNNAMED
--add-opens=java.base/jdk.internal.math=ALL-UNNAMED
--add-opens=java.base/jdk.internal.module=ALL-UNNAMED
--add-opens=java.base/jdk.internal.util.jar=ALL-UNNAMED
--add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED
--add-opens=java.base/sun.nio.ch=ALL-UNNAMED
--add-opens=java.base/java.io=ALL-UNNAMED
--add-opens=java.base/java.nio=ALL-UNNAMED
--add-opens=java.base/java.util.concurrent=ALL-UNNAMED
--add-opens=java.base/java.util=ALL-UNNAMED
--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED
--add-opens=java.base/java.lang=ALL-UNNAMED
--add-opens=java.base/java.math=ALL-UNNAMED
--add-opens=java.base/java.lang.reflect=ALL-UNNAMED
--add-opens=java.base/java.net=ALL-UNNAMED
OPTS
}

port_open() { # PORT
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

pid_alive() { [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null; }

start() { # [PORT] [DIR]
    local port="${1:-9042}" dir="${2:-$BASE/run}"
    install
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    if [[ -f "$dir/cassandra.pid" ]] && pid_alive "$(cat "$dir/cassandra.pid")"; then
        log "already running (pid $(cat "$dir/cassandra.pid")) in $dir"
        return 0
    fi
    if port_open "$port"; then
        log "port $port is already in use"; exit 1
    fi
    write_conf "$dir" "$port"
    jvm_opts "$dir" >"$dir/conf/jvm.opts"
    : >"$dir/logs/system.log"
    log "starting Cassandra $VERSION on 127.0.0.1:$port (heap $HEAP, dir $dir${PIN[*]:+, ${PIN[*]}})"
    (cd "$HOME_DIR" && exec setsid ${PIN[@]+"${PIN[@]}"} java @"$dir/conf/jvm.opts" -cp "$dir/conf:$LIB/*" \
        org.apache.cassandra.service.CassandraDaemon </dev/null >"$dir/logs/stdout.log" 2>&1) &
    local pid=$!
    echo "$pid" >"$dir/cassandra.pid"
    echo "$dir" >"$BASE/last-run-dir"
    local deadline=$((SECONDS + START_TIMEOUT))
    while (( SECONDS < deadline )); do
        if ! pid_alive "$pid"; then
            log "Cassandra exited during startup; last log lines:"
            tail -n 30 "$dir/logs/stdout.log" "$dir/logs/system.log" >&2 || true
            rm -f "$dir/cassandra.pid"
            exit 1
        fi
        if port_open "$port" && grep -q "Startup complete" "$dir/logs/system.log" 2>/dev/null; then
            log "ready after ${SECONDS}s (pid $pid)"
            return 0
        fi
        sleep 1
    done
    log "not ready after ${START_TIMEOUT}s; stopping it"
    stop "$dir"
    exit 1
}

stop() { # [DIR]
    local dir="${1:-}"
    if [[ -z "$dir" ]]; then
        [[ -f "$BASE/last-run-dir" ]] || { log "nothing to stop"; return 0; }
        dir="$(cat "$BASE/last-run-dir")"
    fi
    local pidf="$dir/cassandra.pid"
    [[ -f "$pidf" ]] || { log "no pid file in $dir; nothing to stop"; return 0; }
    local pid; pid="$(cat "$pidf")"
    if pid_alive "$pid"; then
        log "stopping pid $pid"
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 30); do pid_alive "$pid" || break; sleep 1; done
        if pid_alive "$pid"; then log "still alive; SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; fi
    fi
    rm -f "$pidf"
    log "stopped"
}

status() {
    local dir="${1:-}"
    [[ -n "$dir" ]] || dir="$(cat "$BASE/last-run-dir" 2>/dev/null || true)"
    if [[ -n "$dir" && -f "$dir/cassandra.pid" ]] && pid_alive "$(cat "$dir/cassandra.pid")"; then
        echo "running (pid $(cat "$dir/cassandra.pid"), dir $dir)"
    else
        echo "not running"; return 1
    fi
}

cmd="${1:-install}"; shift || true
case "$cmd" in
    install) install ;;
    start) start "$@" ;;
    stop) stop "$@" ;;
    status) status "$@" ;;
    *) echo "usage: $0 [install|start [PORT] [DIR]|stop [DIR]|status [DIR]]" >&2; exit 2 ;;
esac
