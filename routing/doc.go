// Package routing builds the routing view: one series per model_name of each
// gauge a router compares, whatever the data-parallel layout (engine label)
// or the number of API-server processes (pid label) behind the port.
package routing
