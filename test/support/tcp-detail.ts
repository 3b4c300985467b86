// The tcpCheckResult member as the TCP tests read it (unit and integration).

export interface TcpDetail {
  assertions: Array<{ actual: unknown; passed: boolean }>;
  request: Record<string, unknown>;
  response: {
    data: string;
    bytes: number;
    truncated: boolean;
    address: string;
    family: string;
    connected: boolean;
    end: string | null;
    timings: { dns: number | null; connect: number | null; firstByte: number | null; total: number };
  } | null;
  requestError: string | null;
  jobLog: string[];
}
