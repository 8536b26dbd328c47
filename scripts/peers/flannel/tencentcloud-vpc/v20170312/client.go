// Package v20170312 stands in for Tencent Cloud's VPC SDK, which the Go module proxy does not
// serve (403). Only flannel's tencentvpc backend imports it; every call here fails, so that
// backend refuses to start. The bench uses flannel's host-gw backend, which never calls it.
package v20170312

import "errors"

var errUnavailable = errors.New("the Tencent Cloud VPC SDK is not in this build (the Go module proxy does not serve it)")

type Filter struct {
	Name   *string
	Values []*string
}

type Route struct {
	DestinationCidrBlock *string
	GatewayType          *string
	GatewayId            *string
	RouteId              *uint64
	RouteType            *string
	Enabled              *bool
}

type RouteTable struct {
	RouteTableId *string
	RouteSet     []*Route
}

type DescribeRouteTablesRequest struct{ Filters []*Filter }

type DescribeRouteTablesResponse struct {
	Response *struct{ RouteTableSet []*RouteTable }
}

type RoutesRequest struct {
	RouteTableId *string
	Routes       []*Route
}

type Client struct{}

func NewClientWithSecretId(id, secret, region string) (*Client, error) { return nil, errUnavailable }
func NewDescribeRouteTablesRequest() *DescribeRouteTablesRequest {
	return &DescribeRouteTablesRequest{}
}
func NewDeleteRoutesRequest() *RoutesRequest { return &RoutesRequest{} }
func NewCreateRoutesRequest() *RoutesRequest { return &RoutesRequest{} }

func (*Client) DescribeRouteTables(*DescribeRouteTablesRequest) (*DescribeRouteTablesResponse, error) {
	return nil, errUnavailable
}
func (*Client) DeleteRoutes(*RoutesRequest) (struct{}, error) { return struct{}{}, errUnavailable }
func (*Client) CreateRoutes(*RoutesRequest) (struct{}, error) { return struct{}{}, errUnavailable }
