import { EventEmitter } from "events";
import type { Logger } from "./logger";

export interface WidgetOptions {
  title: string;
  width?: number;
  height?: number;
  collapsible: boolean;
}

export type WidgetState = "open" | "closed" | "loading";

const DEFAULT_OPTIONS: WidgetOptions = { title: "Untitled", collapsible: true };

export class Widget extends EventEmitter {
  private state: WidgetState = "closed";

  constructor(private readonly options: WidgetOptions, private readonly log: Logger) {
    super();
    this.options = { ...DEFAULT_OPTIONS, ...options };
  }

  open(): void {
    if (this.state === "open") {
      return;
    }
    this.state = "open";
    this.log.debug(`widget ${this.options.title} opened`);
    this.emit("open", this.options.title);
  }

  close(): void {
    this.state = "closed";
    this.emit("close");
  }

  async load(url: string): Promise<string> {
    this.state = "loading";
    const response = await fetch(url);
    if (!response.ok) {
      throw new Error(`failed to load ${url}: ${response.status}`);
    }
    const body = await response.text();
    this.state = "open";
    return body;
  }
}

export function area(options: WidgetOptions): number {
  return (options.width ?? 0) * (options.height ?? 0);
}

export const toggle = (widget: Widget, open: boolean): void => {
  open ? widget.open() : widget.close();
};
