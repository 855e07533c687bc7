/** Cursor pagination (`?limit=&cursor=` → `{items, next_cursor}`) as async iteration. */

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

export type PageFetcher<T> = (cursor: string | undefined) => Promise<Page<T>>;

/**
 * Every item of a list: `for await (const x of list)` walks all pages lazily;
 * `page(cursor?)` reads one page; `pages()` walks page by page; `all()` collects.
 */
export class Paginated<T> implements AsyncIterable<T> {
  constructor(private readonly fetchPage: PageFetcher<T>) {}

  page(cursor?: string): Promise<Page<T>> {
    return this.fetchPage(cursor);
  }

  async *pages(): AsyncGenerator<Page<T>> {
    let cursor: string | undefined;
    do {
      const page = await this.fetchPage(cursor);
      yield page;
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    for await (const page of this.pages()) yield* page.items;
  }

  async all(): Promise<T[]> {
    const out: T[] = [];
    for await (const item of this) out.push(item);
    return out;
  }
}
