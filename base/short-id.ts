/** A node id as logs and status show it: its first 10 characters, enough to tell members apart. */
export const shortId = (id: string): string => id.slice(0, 10);
