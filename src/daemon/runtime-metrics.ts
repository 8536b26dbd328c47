// The process and Node.js series Prometheus dashboards for a Node.js service expect, under the
// names prom-client's default metrics give them (so existing dashboards keep working): CPU,
// resident and virtual memory, fds, start time, V8's heap, event-loop delay and GC pauses.
// Read from /proc and Node at scrape time; only the event-loop delay and the GC pauses are
// collected in between, from the moment the metrics listener starts.
import { readdirSync, readFileSync } from 'node:fs';
import { monitorEventLoopDelay, PerformanceObserver, constants, type IntervalHistogram } from 'node:perf_hooks';
import v8 from 'node:v8';
import { header, Histogram, num } from './exposition.js';

const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};

const startTime = Math.round(Date.now() / 1000 - process.uptime());

function procStatusBytes(): { rss: number; vsize: number; data: number } {
  const text = readFileSync('/proc/self/status', 'utf8');
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), vsize: kb('VmSize'), data: kb('VmData') };
}

function maxFds(): number {
  const m = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
  return m ? Number(m[1]) : NaN;
}

export class RuntimeMetrics {
  private readonly loopDelay: IntervalHistogram = monitorEventLoopDelay({ resolution: 10 });
  private readonly gc = new Histogram('nodejs_gc_duration_seconds', 'Garbage collection duration by kind, one of major, minor, incremental or weakcb.', [0.001, 0.01, 0.1, 1, 2, 5], ['kind']);
  private readonly gcObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = GC_KINDS[((e as { detail?: { kind?: number } }).detail)?.kind ?? -1] ?? 'unknown';
      this.gc.observe(e.duration / 1000, { kind });
    }
  });

  constructor() {
    this.loopDelay.enable();
    this.gcObserver.observe({ entryTypes: ['gc'] });
  }

  stop(): void {
    this.loopDelay.disable();
    this.gcObserver.disconnect();
  }

  render(): string {
    const lines: string[] = [];
    const one = (name: string, help: string, type: 'counter' | 'gauge', value: number, labels = '') =>
      lines.push(`${header(name, help, type)}${name}${labels} ${num(value)}\n`);
    const cpu = process.cpuUsage();
    const mem = procStatusBytes();
    one('process_cpu_user_seconds_total', 'Total user CPU time spent in seconds.', 'counter', cpu.user / 1e6);
    one('process_cpu_system_seconds_total', 'Total system CPU time spent in seconds.', 'counter', cpu.system / 1e6);
    one('process_cpu_seconds_total', 'Total user and system CPU time spent in seconds.', 'counter', (cpu.user + cpu.system) / 1e6);
    one('process_start_time_seconds', 'Start time of the process since unix epoch in seconds.', 'gauge', startTime);
    one('process_resident_memory_bytes', 'Resident memory size in bytes.', 'gauge', mem.rss);
    one('process_virtual_memory_bytes', 'Virtual memory size in bytes.', 'gauge', mem.vsize);
    one('process_heap_bytes', 'Process heap size in bytes.', 'gauge', mem.data);
    one('process_open_fds', 'Number of open file descriptors.', 'gauge', readdirSync('/proc/self/fd').length - 1); // less the one readdir held
    one('process_max_fds', 'Maximum number of open file descriptors.', 'gauge', maxFds());
    const d = this.loopDelay;
    const s = (ns: number) => ns / 1e9;
    one('nodejs_eventloop_lag_seconds', 'Lag of event loop in seconds: the mean delay since the last scrape beyond the 10 ms sampling interval.', 'gauge', Math.max(0, s(d.mean || 0) - 0.01));
    one('nodejs_eventloop_lag_min_seconds', 'The minimum recorded event loop delay.', 'gauge', s(d.count ? d.min : 0));
    one('nodejs_eventloop_lag_max_seconds', 'The maximum recorded event loop delay.', 'gauge', s(d.max));
    one('nodejs_eventloop_lag_p50_seconds', 'The 50th percentile of the recorded event loop delays.', 'gauge', s(d.percentile(50)));
    one('nodejs_eventloop_lag_p99_seconds', 'The 99th percentile of the recorded event loop delays.', 'gauge', s(d.percentile(99)));
    d.reset();
    const heap = process.memoryUsage();
    one('nodejs_heap_size_total_bytes', 'Process heap size from Node.js in bytes.', 'gauge', heap.heapTotal);
    one('nodejs_heap_size_used_bytes', 'Process heap size used from Node.js in bytes.', 'gauge', heap.heapUsed);
    one('nodejs_external_memory_bytes', 'Node.js external memory size in bytes.', 'gauge', heap.external);
    const spaces = v8.getHeapSpaceStatistics();
    for (const [suffix, help, pick] of [
      ['total', 'Process heap space size total from Node.js in bytes.', (x: v8.HeapSpaceInfo) => x.space_size],
      ['used', 'Process heap space size used from Node.js in bytes.', (x: v8.HeapSpaceInfo) => x.space_used_size],
      ['available', 'Process heap space size available from Node.js in bytes.', (x: v8.HeapSpaceInfo) => x.space_available_size],
    ] as const) {
      const name = `nodejs_heap_space_size_${suffix}_bytes`;
      lines.push(header(name, help, 'gauge') + spaces.map((x) => `${name}{space="${x.space_name.replace(/_space$/, '')}"} ${pick(x)}\n`).join(''));
    }
    const [major, minor, patch] = process.versions.node.split('.');
    one('nodejs_version_info', 'Node.js version info.', 'gauge', 1, `{major="${major}",minor="${minor}",patch="${patch}",version="${process.version}"}`);
    return lines.join('') + this.gc.render();
  }
}
