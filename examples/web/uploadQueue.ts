// Client-side upload queue used by the Lumen web app.
//
// Files are uploaded in parts of PART_SIZE bytes, at most MAX_PARALLEL files at
// a time. A part that fails is retried with exponential backoff; when the
// server answers 429 its `retry_after_ms` value replaces the computed delay.

export const PART_SIZE = 8 * 1024 * 1024; // 8 MiB, matches the server
export const MAX_PARALLEL = 3;
const MAX_ATTEMPTS = 6;
const BASE_DELAY_MS = 500;

export interface UploadJob {
  file: File;
  albumId?: string;
  onProgress?: (sentBytes: number, totalBytes: number) => void;
}

interface RateLimited {
  error: "rate_limited";
  retry_after_ms: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Delay before attempt `n` (1-based): 0.5 s, 1 s, 2 s, ... plus up to 25% jitter. */
export function backoffDelay(attempt: number): number {
  const base = BASE_DELAY_MS * 2 ** (attempt - 1);
  return base + Math.random() * base * 0.25;
}

export class UploadQueue {
  private pending: UploadJob[] = [];
  private active = 0;

  constructor(private readonly endpoint = "/api/v1/uploads") {}

  add(job: UploadJob): void {
    this.pending.push(job);
    this.pump();
  }

  private pump(): void {
    while (this.active < MAX_PARALLEL && this.pending.length > 0) {
      const job = this.pending.shift()!;
      this.active++;
      this.upload(job).finally(() => {
        this.active--;
        this.pump();
      });
    }
  }

  /** Upload one file; resumes from the server's Upload-Offset after a reload. */
  private async upload(job: UploadJob): Promise<void> {
    const start = await fetch(this.endpoint, {
      method: "POST",
      headers: { "Upload-Length": String(job.file.size), "File-Name": encodeURIComponent(job.file.name) },
    });
    const url = start.headers.get("Location")!;
    let offset = Number(start.headers.get("Upload-Offset") ?? 0);
    while (offset < job.file.size) {
      const part = job.file.slice(offset, offset + PART_SIZE);
      await this.sendPart(url, part, offset);
      offset += part.size;
      job.onProgress?.(offset, job.file.size);
    }
  }

  private async sendPart(url: string, part: Blob, offset: number): Promise<void> {
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      const res = await fetch(url, {
        method: "PATCH",
        headers: { "Upload-Offset": String(offset), "Content-Type": "application/offset+octet-stream" },
        body: part,
      });
      if (res.ok) return;
      if (res.status === 429) {
        const body = (await res.json()) as RateLimited;
        await sleep(body.retry_after_ms);
        attempt--; // a 429 is not counted as a failed attempt
        continue;
      }
      if (res.status === 413) throw new Error("LUM-E451: file is larger than upload_max_mb");
      await sleep(backoffDelay(attempt));
    }
    throw new Error(`upload of part at offset ${offset} failed after ${MAX_ATTEMPTS} attempts`);
  }
}
