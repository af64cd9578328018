// Package sim holds what every simulator of the outside world shares
// (provider-sim, carrier-sim, broker-sim): the clock they read, the seeded
// dice they draw every decision from, and their fault knobs as flags,
// environment variables and admin settings.
package sim
