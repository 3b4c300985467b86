// The proxies outbound HTTP goes through (HTTP_PROXY, HTTPS_PROXY, NO_PROXY; src/config.ts reads them).

export interface ProxyConfig {
  httpProxy?: string;
  httpsProxy?: string;
  noProxy?: string;
}
